"""The audit log reader, on files: a line the API server is still writing is neither parsed nor counted."""
import json

from kubegpu_devcluster.audit import AuditLog


def _event(verb, user="kubegpu-admin", name="x"):
    return json.dumps({"stage": "ResponseComplete", "verb": verb, "user": {"username": user},
                       "requestURI": "/api/v1/namespaces/a/configmaps/" + name,
                       "objectRef": {"resource": "configmaps", "namespace": "a", "name": name},
                       "responseStatus": {"code": 200}}) + "\n"


def test_a_half_written_last_line_is_left_for_later(tmp_path):
    log = tmp_path / "audit.log"
    whole = _event("create", name="first")
    log.write_text(whole + _event("patch", user="kubegpu-sim:knative")[:40])
    audit = AuditLog(log)
    assert audit.mark() == len(whole.encode())
    assert [str(e) for e in audit.writes(0)] == ["create a/configmaps/first -> 200 by kubegpu-admin"]


def test_events_after_a_mark_are_counted_from_the_next_whole_line(tmp_path):
    log = tmp_path / "audit.log"
    first = _event("create", name="first")
    partial = _event("patch", name="second")
    log.write_text(first + partial[:25])
    audit = AuditLog(log)
    since = audit.mark()
    with open(log, "a") as f:
        f.write(partial[25:] + _event("delete", name="third"))
    assert [e.verb for e in audit.writes(since)] == ["patch", "delete"]
    assert audit.mark() == log.stat().st_size
