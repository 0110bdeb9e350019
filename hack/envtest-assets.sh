#!/usr/bin/env bash
# Prints a directory holding the control plane binaries the tests and
# `make run` use: kube-apiserver and etcd (envtest), kube-controller-manager
# and kube-scheduler (the real Job, garbage collector and TTL controllers and
# the scheduler, for the Job executor), and kubectl.
#
# Missing binaries are fetched first as released binaries of the pinned
# Kubernetes version, the way controller-runtime's setup-envtest does:
# kube-apiserver, etcd and kubectl from the envtest release tarball listed in
# controller-tools' envtest-releases.yaml (sha512 checked), and
# kube-controller-manager and kube-scheduler from dl.k8s.io (sha256 checked).
# When that fails (an offline machine: connects time out after a few
# seconds; no release for this platform; a checksum mismatch), they are
# built from the Go module proxy through the wrapper modules in
# hack/envtest/ (several minutes, once). Which path was taken, and why, is
# printed on stderr; stdout is only the directory (callers use $(...)).
# Binaries are cached in bin/k8s/<version>/.
#
# KUBEBUILDER_ASSETS names a cache kept elsewhere (shared between checkouts,
# or restored by CI). It is used as it is when it holds every binary; binaries
# it lacks are fetched or built into it when it is writable, otherwise into
# bin/k8s/<version>/, next to links to the ones it has.
#
# Environment:
#   EMAILDATA_ENVTEST_DOWNLOAD=0   never download (build only)
#   EMAILDATA_ENVTEST_BUILD=0      never build (fail when the download fails)
#   EMAILDATA_ENVTEST_INDEX_URL    the envtest release index (default: controller-tools')
#   EMAILDATA_K8S_RELEASE_URL      the Kubernetes release base (default: https://dl.k8s.io/release)
#   EMAILDATA_CONNECT_TIMEOUT      seconds to wait for a connection (default 3)
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
    echo "envtest-assets: using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS (every binary present)" >&2
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

log() { echo "envtest-assets: $*" >&2; }

# missing names...: the named binaries dir lacks.
missing() {
  local b out=()
  for b in "$@"; do [ -x "$dir/$b" ] || out+=("$b"); done
  echo "${out[*]}"
}

os=$(uname -s | tr '[:upper:]' '[:lower:]')
arch=$(uname -m)
case $arch in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
index_url=${EMAILDATA_ENVTEST_INDEX_URL:-https://raw.githubusercontent.com/kubernetes-sigs/controller-tools/HEAD/envtest-releases.yaml}
release_url=${EMAILDATA_K8S_RELEASE_URL:-https://dl.k8s.io/release}
connect_timeout=${EMAILDATA_CONNECT_TIMEOUT:-3}
why= # why the download path failed

fetch() { # url file max-seconds
  curl -fsSL --proto '=https,http' --connect-timeout "$connect_timeout" --max-time "$3" -o "$2" "$1" 2>/dev/null
}

# fetch_failed url rc: record why a fetch failed.
fetch_failed() {
  case $2 in
  6 | 7 | 28) why="cannot reach ${1%%/*}//$(echo "$1" | cut -d/ -f3) (curl exit $2: offline or blocked)" ;;
  22) why="$1 answered an HTTP error" ;;
  *) why="fetching $1 failed (curl exit $2)" ;;
  esac
}

# index_entry file: "sha512 url" of this version's envtest tarball in the
# controller-tools index (releases: vX.Y.Z: envtest-...tar.gz: hash, selfLink).
index_entry() {
  awk -v ver="v$k8s_version:" -v file="envtest-v$k8s_version-$os-$arch.tar.gz:" '
    /^  [^ ]/ { inver = ($1 == ver); infile = 0; next }
    inver && /^    [^ ]/ { infile = ($1 == file); next }
    inver && infile && $1 == "hash:" { hash = $2 }
    inver && infile && $1 == "selfLink:" { link = $2 }
    END { if (hash != "" && link != "") print hash, link }
  ' "$1"
}

# check_sum algo want file: does file's digest equal want?
check_sum() {
  local got
  got=$("sha$1sum" "$3" | cut -d' ' -f1)
  [ "$got" = "$2" ] || { why="$(basename "$3"): sha$1 $got, want $2"; return 1; }
}

# download_envtest tmp: kube-apiserver, etcd and kubectl from the envtest tarball.
download_envtest() {
  local tmp=$1 entry b rc=0
  fetch "$index_url" "$tmp/index.yaml" 20 || rc=$?
  if [ $rc -ne 0 ]; then fetch_failed "$index_url" $rc; return 1; fi
  entry=$(index_entry "$tmp/index.yaml")
  if [ -z "$entry" ]; then why="no envtest release v$k8s_version for $os/$arch in $index_url"; return 1; fi
  fetch "${entry#* }" "$tmp/envtest.tar.gz" 600 || rc=$?
  if [ $rc -ne 0 ]; then fetch_failed "${entry#* }" $rc; return 1; fi
  check_sum 512 "${entry%% *}" "$tmp/envtest.tar.gz" || return 1
  mkdir "$tmp/x"
  tar -xzf "$tmp/envtest.tar.gz" -C "$tmp/x" || { why="cannot unpack ${entry#* }"; return 1; }
  for b in kube-apiserver etcd kubectl; do
    [ -e "$dir/$b" ] && continue
    local f
    f=$(find "$tmp/x" -type f -name "$b" | head -n1)
    if [ -z "$f" ]; then
      [ "$b" = kubectl ] && continue
      why="${entry#* } holds no $b"
      return 1
    fi
    chmod +x "$f"
    mv "$f" "$tmp/$b"
  done
}

# download_release tmp names...: Kubernetes release binaries with their .sha256.
download_release() {
  local tmp=$1 b url rc=0
  shift
  for b in "$@"; do
    url="$release_url/v$k8s_version/bin/$os/$arch/$b"
    fetch "$url.sha256" "$tmp/$b.sha256" 20 || rc=$?
    [ $rc -eq 0 ] && { fetch "$url" "$tmp/$b" 600 || rc=$?; }
    if [ $rc -ne 0 ]; then fetch_failed "$url" $rc; return 1; fi
    check_sum 256 "$(cut -d' ' -f1 <"$tmp/$b.sha256")" "$tmp/$b" || return 1
    chmod +x "$tmp/$b"
  done
}

# download: fetch the missing binaries; all verified ones are installed,
# so a partial success leaves less to build.
download() {
  local want envtest_bins release_bins b tmp failed=0
  want=$(missing "${binaries[@]}")
  [ -z "$want" ] && return 0
  if [ "${EMAILDATA_ENVTEST_DOWNLOAD:-1}" = 0 ]; then why="EMAILDATA_ENVTEST_DOWNLOAD=0"; return 1; fi
  if ! command -v curl >/dev/null 2>&1; then why="curl is not installed"; return 1; fi
  envtest_bins=$(missing kube-apiserver etcd)
  release_bins=$(missing kube-controller-manager kube-scheduler)
  build_tmp=$(mktemp -d "$dir/.download.XXXXXX")
  tmp=$build_tmp
  if [ -n "$envtest_bins" ]; then
    if download_envtest "$tmp"; then
      for b in kube-apiserver etcd kubectl; do [ -e "$tmp/$b" ] && mv "$tmp/$b" "$dir/$b"; done
      log "downloaded $envtest_bins (and kubectl) v$k8s_version from the envtest release, sha512 verified"
    else
      failed=1
    fi
  fi
  # An unreachable host is not retried with the second one: offline
  # machines fall back to building after one connect timeout.
  if [ -n "$release_bins" ] && ! [[ $why == cannot\ reach* ]]; then
    # shellcheck disable=SC2086 # word splitting intended
    if download_release "$tmp" $release_bins; then
      for b in $release_bins; do mv "$tmp/$b" "$dir/$b"; done
      log "downloaded $release_bins v$k8s_version from $release_url, sha256 verified"
    else
      failed=1
    fi
  fi
  rm -rf "$build_tmp"
  build_tmp=
  return $failed
}

if [ -z "$(missing "${binaries[@]}")" ]; then
  log "using $dir (every binary present)"
elif ! download; then
  if [ "${EMAILDATA_ENVTEST_BUILD:-1}" = 0 ]; then
    log "download failed ($why); not building (EMAILDATA_ENVTEST_BUILD=0)"
    exit 1
  fi
  log "download failed ($why); building $(missing "${binaries[@]}") from the Go module proxy instead"
fi

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
