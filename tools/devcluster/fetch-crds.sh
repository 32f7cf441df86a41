#!/usr/bin/env bash
# Fetches the upstream CRDs the local cluster loads, at the pinned commits of crd-sources.tsv, into a folder
# for KUBEGPU_CRDS_DIR (for machines without the workspace's ../shared/crds). Each file is checked against
# its sha256; extracts (a line range of a multi-document upstream file) are cut the same way.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: fetch-crds.sh <destination folder>}
mkdir -p "$dest"
grep -v '^#' "$here/crd-sources.tsv" | while IFS=$'\t' read -r folder file repo commit path lines sha; do
  mkdir -p "$dest/$folder"
  url="https://raw.githubusercontent.com/$repo/$commit/$path"
  tmp=$(mktemp)
  curl -fsSL "$url" -o "$tmp"
  if [ "$lines" != "-" ]; then sed -n "${lines%-*},${lines#*-}p" "$tmp" > "$dest/$folder/$file"; else mv "$tmp" "$dest/$folder/$file"; fi
  rm -f "$tmp"
  echo "$sha  $dest/$folder/$file" | sha256sum -c --quiet - || { echo "checksum mismatch: $folder/$file" >&2; exit 1; }
done
echo "CRDs in $dest; use: export KUBEGPU_CRDS_DIR=$dest"
