#!/usr/bin/env bash
# Builds the local cluster's binaries from Go modules (versions: build/*/go.mod) into a user cache folder,
# keyed by a hash of the module files so that a version bump rebuilds and a warm cache builds nothing.
# Prints the folder that holds the binaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${KUBEGPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubegpu}

build_one() {  # <folder under build/>[/<binary>] <main package> [ldflags] [tags]; the binary is named after the folder
  local dir=$here/build/${1%%/*} bin=${1##*/} pkg=$2 ldflags=${3:-} tags=${4:-} key out
  # A tool with a main.go of our own beside go.mod (device-plugin-config, cert-manager) is keyed by that source too;
  # the others' keys stay as they were.
  key=$( (cat "$dir/go.mod" "$dir/go.sum"; echo "$ldflags"; [ -z "$tags" ] || echo "tags $tags"
          [ ! -f "$dir/main.go" ] || cat "$dir/main.go") | sha256sum | cut -c1-12)
  out=$cache/bin/$bin-$key
  if [ ! -x "$out/$bin" ]; then
    echo "building $bin ($pkg) into $out; the first build takes several minutes" >&2
    mkdir -p "$out.tmp"
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out.tmp/$bin" "$pkg")
    rm -rf "$out" && mv "$out.tmp" "$out"
  fi
  ln -sfn "$out/$bin" "$cache/bin/$bin"
}

mkdir -p "$cache/bin"
build_one etcd go.etcd.io/etcd/server/v3
# A module build carries no version stamp; stamp the one go.mod pins so /version and clients see it.
kube=$(cd "$here/build/kube-apiserver" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$kube" | cut -d. -f2)
v=k8s.io/component-base/version
stamp="-X $v.gitVersion=$kube -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
build_one kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$stamp"
# The controller-manager and the scheduler share the API server's module, so most packages are compiled once.
build_one kube-apiserver/kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$stamp"
build_one kube-apiserver/kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$stamp"
# Same for helm: an unstamped build reports "v3.22", and kubernetes.core.helm reads `helm version`.
helm=$(cd "$here/build/helm" && go list -m -f '{{.Version}}' helm.sh/helm/v3)
build_one helm helm.sh/helm/v3/cmd/helm \
  "-X helm.sh/helm/v3/internal/version.version=$helm -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
# KWOK (the simulated kubelets) knows its own version: nothing to stamp.
build_one kwok sigs.k8s.io/kwok/cmd/kwok
build_one toxiproxy github.com/Shopify/toxiproxy/v2/cmd/server  # TCP fault proxy for tests/integration/test_api_faults.py
# promtool checks and unit-tests the monitoring stage's alert rules (tests/unit/.../monitoring). An unstamped build
# reports version "(devel)"; promtool's checks do not depend on it. `remove_all_sd` (Prometheus 3.10+) leaves out the
# cloud service-discovery plugins (AWS, Azure, GCE... SDKs), which rule checks never use: a shorter cold build.
build_one promtool github.com/prometheus/prometheus/cmd/promtool "" remove_all_sd
# NVIDIA's device-plugin config API (github.com/NVIDIA/k8s-device-plugin v0.17.4) behind a small main of ours: what
# the plugin advertises with each config the collection renders (kubegpu_devcluster/device_plugin_checker.py).
build_one device-plugin-config .
# cert-manager's controllers and CA injector (build/cert-manager/main.go: upstream's main packages are not served).
# Stamped so that the controller logs the version it was built from.
certmanager=$(cd "$here/build/cert-manager" && go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)
build_one cert-manager . "-X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$certmanager"
echo "$cache/bin"
