"""The AWX job templates (extensions/awx/controller_templates.yml) are generated from the playbooks and the roles'
argument specs: regenerated here, they must equal the file, so surveys and role validation never disagree."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "awx"))
import job_templates  # noqa: E402  pylint: disable=wrong-import-position


def test_the_job_templates_file_is_what_the_generator_writes():
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "awx" / "job_templates.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_every_playbook_has_a_template_and_every_scalar_role_option_a_question():
    templates = {t["playbook"]: t for t in job_templates.templates()}
    for path in (REPO / "playbooks").glob("*.yml"):
        if path.stem in job_templates.ADMIN_PLAYBOOKS:
            assert f"playbooks/{path.name}" not in templates
            continue
        template = templates[f"playbooks/{path.name}"]
        questions = {q["variable"]: q for q in template.get("survey_spec", {}).get("spec", [])}
        for role in job_templates.playbook_roles(path.stem):
            if role in job_templates.INTERNAL_ROLES:
                continue
            spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
            for name, option in spec["argument_specs"]["main"].get("options", {}).items():
                kind = option.get("type", "str")
                if kind in ("list", "dict"):
                    assert name not in questions
                    continue
                q = questions[name]
                assert not q["required"] and q["default"] == ""
                if kind == "bool":
                    assert q["choices"] == ["true", "false"]
                elif option.get("choices"):
                    assert q["type"] == "multiplechoice" and q["choices"] == [str(c) for c in option["choices"]]
                else:
                    assert q["type"] == {"str": "text", "int": "integer", "float": "float"}[kind]


def test_site_asks_for_every_stage_role():
    site = next(t for t in job_templates.templates() if t["playbook"] == "playbooks/site.yml")
    variables = {q["variable"] for q in site["survey_spec"]["spec"]}
    assert {"gpu_operator_timeout", "node_pools_timeout", "dra_timeout", "serving_timeout"} <= variables
    assert site["ask_tags_on_launch"] and site["credentials"] == [job_templates.CREDENTIAL]


def test_every_template_asks_first_which_hosts_one_per_cluster():
    # Every play runs on "{{ kubegpu_hosts | default('localhost', true) }}": an AWX inventory of one host per cluster needs
    # the group named, or the job runs on localhost only.
    for template in job_templates.templates():
        playbook = (REPO / template["playbook"]).read_text()
        assert "kubegpu_hosts | default('localhost', true)" in playbook, template["playbook"]
        first = template["survey_spec"]["spec"][0]
        assert (first["variable"], first["type"], first["required"], first["default"]) == (
            "kubegpu_hosts", "text", False, ""), template["name"]
