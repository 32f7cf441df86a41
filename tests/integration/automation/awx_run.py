"""Run a playbook of the collection the way AWX runs a job template: through ansible-runner, with nothing of the
cluster's but what AWX's "OpenShift or Kubernetes API Bearer Token" credential injects (K8S_AUTH_HOST,
K8S_AUTH_API_KEY, K8S_AUTH_VERIFY_SSL, K8S_AUTH_SSL_CA_CERT), and the job's extra variables.

Used by the integration tests (tests/integration/test_site_lifecycle.py) and runnable on its own:
    python awx_run.py <private_data_dir> <playbook> <inventory> <extravars.json> <envvars.json>
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BEARER_TOKEN_VARIABLES = ("K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "K8S_AUTH_VERIFY_SSL", "K8S_AUTH_SSL_CA_CERT")


def credential_env(server: str, token: str, ca_file: str) -> dict:
    """What the bearer-token credential injects, and nothing else."""
    return {"K8S_AUTH_HOST": server, "K8S_AUTH_API_KEY": token, "K8S_AUTH_VERIFY_SSL": "true",
            "K8S_AUTH_SSL_CA_CERT": ca_file}


def execution_env(home: Path) -> dict:
    """The process environment of the run, as an execution environment has it: no kubeconfig, no K8S_AUTH_*
    variable of the caller's, a home of its own. The collections (ansible.cfg) and the local cluster's binaries and
    charts (KUBEGPU_CACHE, KUBEGPU_CHARTS_DIR) are what an execution environment would carry."""
    home.mkdir(parents=True, exist_ok=True)
    keep = ("LANG", "LC_ALL", "KUBEGPU_CHARTS_DIR", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}/usr/local/bin:/usr/bin:/bin", HOME=str(home),
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               KUBEGPU_CACHE=os.environ.get("KUBEGPU_CACHE") or str(Path.home() / ".cache" / "kubegpu"))
    return env


def run(private_data_dir: Path, playbook: str, inventory: str, extravars: dict, envvars: dict,
        cmdline: str = "", timeout: float = 900) -> subprocess.CompletedProcess:
    """ansible-runner, in a process of its own whose environment is execution_env(): its stdout, stderr and
    artifacts (private_data_dir/artifacts/<ident>/) are what the job's output would be."""
    private_data_dir.mkdir(parents=True, exist_ok=True)
    script = (
        "import json, sys, ansible_runner\n"
        "a = json.loads(sys.argv[1])\n"
        "r = ansible_runner.run(private_data_dir=a['dir'], playbook=a['playbook'], inventory=a['inventory'],\n"
        "                       extravars=a['extravars'], envvars=a['envvars'], cmdline=a['cmdline'] or None,\n"
        "                       ident='job', quiet=False)\n"
        "sys.exit(0 if r.status == 'successful' else 2)\n")
    args = json.dumps({"dir": str(private_data_dir), "playbook": playbook, "inventory": inventory,
                       "extravars": extravars, "envvars": envvars, "cmdline": cmdline})
    return subprocess.run([sys.executable, "-c", script, args], cwd=private_data_dir, capture_output=True, text=True,
                          env=execution_env(private_data_dir / "home"), timeout=timeout, check=False)
