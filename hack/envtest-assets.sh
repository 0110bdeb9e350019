#!/usr/bin/env bash
# Prints a directory holding the control plane binaries the tests and
# `make run` use: kube-apiserver and etcd (envtest), kube-controller-manager
# and kube-scheduler (the real Job, garbage collector and TTL controllers and
# the scheduler, for the Job executor), and kubectl when it is installed.
#
# The binaries are built once from the Go module proxy (no internet downloads
# of release tarballs) through the wrapper modules in hack/envtest/, and
# cached in bin/k8s/<version>/.
#
# KUBEBUILDER_ASSETS names a cache kept elsewhere (shared between checkouts,
# or restored by CI). It is used as it is when it holds every binary; binaries
# it lacks are built into it when it is writable, otherwise into
# bin/k8s/<version>/, next to links to the ones it has.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=1.36.3
binaries=(kube-apiserver etcd kube-controller-manager kube-scheduler)

complete() { # dir: does it hold every binary?
  local b
  for b in "${binaries[@]}"; do [ -x "$1/$b" ] || return 1; done
}

dir="$root/bin/k8s/$k8s_version"
if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  if complete "$KUBEBUILDER_ASSETS"; then
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  if [ -d "$KUBEBUILDER_ASSETS" ] && [ -w "$KUBEBUILDER_ASSETS" ]; then
    dir=$KUBEBUILDER_ASSETS
  else
    mkdir -p "$dir"
    for b in "${binaries[@]}" kubectl; do
      if [ -x "$KUBEBUILDER_ASSETS/$b" ] && [ ! -e "$dir/$b" ]; then ln -s "$KUBEBUILDER_ASSETS/$b" "$dir/$b"; fi
    done
  fi
fi
mkdir -p "$dir"

# Several checkouts may share one cache: build under a lock, into temporary
# names, and rename when done.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.build.lock"
  flock 9
fi

build_tmp=
trap 'if [ -n "$build_tmp" ]; then rm -rf "$build_tmp"; fi' EXIT

build() { # wrapper-dir name=package...
  local wrapper=$1 entry missing=() pkgs=()
  shift
  for entry in "$@"; do
    [ -x "$dir/${entry%%=*}" ] || { missing+=("${entry%%=*}"); pkgs+=("${entry#*=}"); }
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "building ${missing[*]} from the Go module proxy (first run only, several minutes)..." >&2
  build_tmp=$(mktemp -d "$dir/.build.XXXXXX")
  local i
  for i in "${!missing[@]}"; do
    # One go invocation per binary keeps the output name explicit; the
    # build cache shares the packages they have in common.
    (cd "$root/hack/envtest/$wrapper" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$build_tmp/${missing[$i]}" "${pkgs[$i]}")
  done
  for i in "${missing[@]}"; do mv "$build_tmp/$i" "$dir/$i"; done
  rmdir "$build_tmp"
  build_tmp=
}

build kubernetes kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
build etcd etcd=go.etcd.io/etcd/server/v3

# envtest also looks for kubectl beside the control plane binaries.
if [ ! -e "$dir/kubectl" ]; then
  if command -v kubectl >/dev/null 2>&1; then
    ln -sf "$(command -v kubectl)" "$dir/kubectl"
  fi
fi
echo "$dir"
