"""Read the API server's audit log: which user made which requests, and how many of them wrote.

Tests and the benchmark take a mark before a run and count the events after it. A write is a create, update,
patch or delete that is not a server-side dry run.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .cluster import ADMIN

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


@dataclass
class Event:
    verb: str
    user: str
    uri: str
    code: int
    resource: str
    namespace: str
    name: str
    subresource: str
    at: float = 0.0   # when the API server completed the response (epoch seconds)

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS and "dryRun=All" not in self.uri

    def __str__(self) -> str:
        target = "/".join(p for p in (self.namespace, self.resource, self.name) if p)
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.verb} {target}{sub} -> {self.code} by {self.user}"


def _epoch(stamp: str | None) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else 0.0


class AuditLog:
    def __init__(self, path: Path):
        self.path = Path(path)

    def mark(self) -> int:
        """Settle, then return the current end of the log: count events after it with events(since=...)."""
        self.settle()
        return self._complete_end()

    def _complete_end(self) -> int:
        """The offset just past the last whole line: a simulator may be half way through writing the next one."""
        if not self.path.exists():
            return 0
        with open(self.path, "rb") as f:
            f.seek(0, 2)
            end = f.tell()
            while end > 0:
                step = min(4096, end)
                f.seek(end - step)
                chunk = f.read(step)
                cut = chunk.rfind(b"\n")
                if cut >= 0:
                    return end - step + cut + 1
                end -= step
        return 0

    def settle(self, quiet: float = 0.3, timeout: float = 5.0) -> None:
        """Wait until the log stops growing for `quiet` seconds, so a finished request's event is in it."""
        deadline = time.monotonic() + timeout
        last = -1
        while time.monotonic() < deadline:
            size = self.path.stat().st_size if self.path.exists() else 0
            if size == last:
                return
            last = size
            time.sleep(quiet)

    def events(self, since: int = 0, user: str | None = ADMIN[0]) -> list:
        self.settle()
        out = []
        with open(self.path, "rb") as f:
            f.seek(since)
            for line in f:
                if not line.endswith(b"\n"):
                    break   # still being written (the simulators keep the API server busy); not one of ours
                e = json.loads(line)
                if e.get("stage") != "ResponseComplete":
                    continue
                who = e.get("user", {}).get("username", "")
                if user is not None and who != user:
                    continue
                ref = e.get("objectRef") or {}
                out.append(Event(e.get("verb", ""), who, e.get("requestURI", ""),
                                 (e.get("responseStatus") or {}).get("code", 0), ref.get("resource", ""),
                                 ref.get("namespace", ""), ref.get("name", ""), ref.get("subresource", ""),
                                 _epoch(e.get("stageTimestamp"))))
        return out

    def writes(self, since: int = 0, user: str | None = ADMIN[0]) -> list:
        return [e for e in self.events(since, user) if e.is_write]
