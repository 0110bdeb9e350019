#!/usr/bin/env bash
# Prints a directory holding kube-apiserver, etcd and kubectl for envtest.
#
# KUBEBUILDER_ASSETS wins when it is set. Otherwise the binaries are built once
# from the Go module proxy (no internet downloads of release tarballs) through
# the wrapper modules in hack/envtest/, and cached in bin/k8s/<version>/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=1.36.3

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

dir="$root/bin/k8s/$k8s_version"
mkdir -p "$dir"

build() { # name wrapper-dir package
  local name=$1 wrapper=$2 pkg=$3
  if [ -x "$dir/$name" ]; then return 0; fi
  echo "building $name from the Go module proxy (first run only, a few minutes)..." >&2
  (cd "$root/hack/envtest/$wrapper" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
}

build kube-apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build etcd etcd go.etcd.io/etcd/server/v3

# envtest also looks for kubectl beside the control plane binaries.
if [ ! -e "$dir/kubectl" ]; then
  if command -v kubectl >/dev/null 2>&1; then
    ln -sf "$(command -v kubectl)" "$dir/kubectl"
  fi
fi
echo "$dir"
