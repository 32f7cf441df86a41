#!/usr/bin/env bash
# Fails when the collection tarball carries what build_ignore should keep out (tests, tools, caches,
# virtual environments, cluster state) or lacks what users need (modules, playbooks, runtime metadata).
set -euo pipefail
tarball=$1
listing=$(tar -tzf "$tarball")
bad=$(grep -E '^(\./)?(tests|tools|extensions|examples|requirements|\.cache|\.venv|\.devcluster|\.ci|\.git)(/|$)' <<<"$listing" || true)
if [ -n "$bad" ]; then
  echo "$tarball contains files it must not ship:"; echo "$bad" | head -20; exit 1
fi
# The capacity report inlines Chart.js into its HTML page: the build and its license ship in the report role.
for need in MANIFEST.json FILES.json meta/runtime.yml plugins/modules/gpu_cluster_info.py playbooks/site.yml README.md \
    roles/report/files/chartjs/chart.umd.min.js roles/report/files/chartjs/LICENSE.md; do
  grep -qx "\(\./\)\?$need" <<<"$listing" || { echo "$tarball lacks $need"; exit 1; }
done
echo "$tarball: $(wc -l <<<"$listing") entries, no tests/tools/caches"
