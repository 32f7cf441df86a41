#!/usr/bin/env bash
# ansible-test sanity bootstraps pip in each of its virtual environments with a get-pip script it downloads.
# Where that download cannot happen (this workspace), seed its cache with the stand-in from ../shared/tools,
# only when the file is missing; elsewhere nothing is done and ansible-test downloads the real script.
set -euo pipefail
python=${1:-python3}
standin=$(cd "$(dirname "$0")/.." && pwd)/../shared/tools/ansible-test-pip-bootstrap.py
[ -f "$standin" ] || exit 0
version=$("$python" - <<'PY'
import os, re, ansible_test
src = open(os.path.join(os.path.dirname(ansible_test.__file__), "_internal", "python_requirements.py")).read()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
target=$HOME/.ansible/test/cache/get_pip_${version//./_}.py
if [ ! -f "$target" ]; then
  mkdir -p "$(dirname "$target")"
  cp "$standin" "$target"
  echo "seeded $target from $standin"
fi
