#!/usr/bin/env bash
# Refreshes the Chart.js build that the capacity report's HTML page inlines (roles/report/files/chartjs/) from the
# npm registry: the pinned version's tarball, checked against the pinned sha512 (npm's dist.integrity) before
# anything is extracted; then its UMD build and license are copied and their sha256 recorded in SHA256SUMS,
# which a unit test checks the shipped files against. To move to another version, change both pins below.
set -euo pipefail
VERSION=4.5.1
INTEGRITY=sha512-GIjfiT9dbmHRiYi6Nl2yFCq7kkwdkp1W/lp2J99rX0yo9tgJGn3lKQATztIjb5tVtevcBtIdICNWqlq5+E8/Pw==
dest=$(cd "$(dirname "$0")/.." && pwd)/roles/report/files/chartjs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "chart.js@$VERSION" >/dev/null)
tarball="$work/chart.js-$VERSION.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$got" != "$INTEGRITY" ]; then
  echo "chart.js@$VERSION: tarball checksum $got, expected $INTEGRITY; nothing changed" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/dist/chart.umd.min.js package/LICENSE.md
cp "$work/package/dist/chart.umd.min.js" "$work/package/LICENSE.md" "$dest/"
(cd "$dest" && sha256sum chart.umd.min.js LICENSE.md > SHA256SUMS && echo "$VERSION" > VERSION)
echo "chart.js $VERSION -> $dest ($(wc -c < "$dest/chart.umd.min.js") bytes, sha512 checked)"
