#!/usr/bin/env bash
# Fetches the upstream Helm charts the integration tests install, at the pinned commits of chart-sources.tsv, into
# a folder for KUBEGPU_CHARTS_DIR (for machines without the workspace's ../shared/charts). Each chart folder is
# checked against the sha256 of its file list (`fetch-charts.sh --digest <folder>` prints it), each single file
# against its own sha256.
#
# Chart.yaml stamping: a row whose stamp column reads <version>@<sha256> is a chart whose repository carries a
# development version (NVIDIA's gpu-operator says v1.0.0-devel / main-latest); its release process writes the
# release tag into `version` and `appVersion`. The script checks the unstamped Chart.yaml against <sha256>, then
# stamps both fields with <version>, as the released chart (and the workspace copy) has them.
#
# KUBEGPU_CHARTS_GIT (default https://github.com) is where <owner>/<name> repositories are cloned from.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

digest() {  # sha256 over "<sha256>  ./<path>" of every file below $1, in byte order of the paths
  (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-64
}

if [ "${1:-}" = "--digest" ]; then
  digest "${2:?usage: fetch-charts.sh --digest <chart folder>}"
  exit 0
fi
dest=${1:?usage: fetch-charts.sh <destination folder> | --digest <chart folder>}
git_base=${KUBEGPU_CHARTS_GIT:-https://github.com}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "fetch-charts.sh: $*" >&2; exit 1; }

checkout() {  # <repo> <commit> -> prints a folder holding the repository at that commit (only the paths asked)
  local repo=$1 commit=$2 dir="$work/${1//\//+}-$2"
  if [ ! -d "$dir" ]; then
    git init -q "$dir"
    git -C "$dir" remote add origin "$git_base/$repo"
    git -C "$dir" -c uploadpack.allowAnySHA1InWant=true fetch -q --depth 1 --filter=blob:none origin "$commit" \
      || { rm -rf "$dir"; fail "cannot fetch $repo@$commit from $git_base"; }
    git -C "$dir" sparse-checkout set --no-cone >/dev/null
  fi
  echo "$dir"
}

grep -v '^#' "$here/chart-sources.tsv" | while IFS=$'\t' read -r target kind repo commit path stamp sha; do
  dir=$(checkout "$repo" "$commit") || exit 1
  git -C "$dir" sparse-checkout add "/$path" >/dev/null
  git -C "$dir" checkout -q "$commit" || fail "cannot check out $path of $repo@$commit"
  [ -e "$dir/$path" ] || fail "$repo@$commit has no $path"
  mkdir -p "$(dirname "$dest/$target")"
  rm -rf "${dest:?}/$target"
  cp -R "$dir/$path" "$dest/$target"
  if [ "$stamp" != "-" ]; then
    version=${stamp%@*}
    echo "${stamp#*@}  $dest/$target/Chart.yaml" | sha256sum -c --quiet - \
      || fail "$target/Chart.yaml at $repo@$commit is not the one expected before stamping"
    sed -i -e "s/^version: .*/version: $version/" -e "s/^appVersion: .*/appVersion: \"$version\"/" \
      "$dest/$target/Chart.yaml"
  fi
  case $kind in
    chart) got=$(digest "$dest/$target") ;;
    file) got=$(sha256sum < "$dest/$target" | cut -c1-64) ;;
    *) fail "unknown kind $kind in chart-sources.tsv" ;;
  esac
  [ "$got" = "$sha" ] || fail "checksum mismatch: $target (expected $sha, got $got)"
  echo "$target: $repo@${commit:0:12} $path" >&2
done
echo "charts in $dest; use: export KUBEGPU_CHARTS_DIR=$dest"
