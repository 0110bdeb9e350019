#!/usr/bin/env bash
# Prints the path of the S3-compatible server the tests and
# `make run ARGS=--store=s3` use: SeaweedFS's `weed` (Apache-2.0), built from
# the Go module proxy through the wrapper module hack/s3server/, whose go.mod
# pins the version. The first build takes several minutes (see
# docs/benchmarks.md, "Building the S3-compatible server"); the binary is
# cached in bin/s3/seaweedfs-<version>/weed. Build output goes to stderr;
# stdout is only the path (callers use $(...)).
#
# EMAILDATA_S3_ASSETS names a cache kept elsewhere (shared between
# checkouts, or restored by CI), as KUBEBUILDER_ASSETS does for the control
# plane: a weed binary there is used as it is; otherwise it is built into it
# when it is a writable directory, else into bin/.
#
# Environment:
#   EMAILDATA_S3_ASSETS     directory of a shared weed cache (see above)
#   EMAILDATA_S3_BUILD=0    never build (fail when no binary is cached)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
wrapper=$root/hack/s3server
version=$(awk '$1 == "github.com/seaweedfs/seaweedfs" { print $2 } $1 == "require" && $2 == "github.com/seaweedfs/seaweedfs" { print $3 }' "$wrapper/go.mod" | head -n1)
if [ -z "$version" ]; then
  echo "s3-server: no github.com/seaweedfs/seaweedfs version in $wrapper/go.mod" >&2
  exit 1
fi
log() { echo "s3-server: $*" >&2; }

dir=$root/bin/s3/seaweedfs-$version
if [ -n "${EMAILDATA_S3_ASSETS:-}" ]; then
  if [ -x "$EMAILDATA_S3_ASSETS/weed" ]; then
    log "using EMAILDATA_S3_ASSETS=$EMAILDATA_S3_ASSETS"
    echo "$EMAILDATA_S3_ASSETS/weed"
    exit 0
  fi
  if [ -d "$EMAILDATA_S3_ASSETS" ] && [ -w "$EMAILDATA_S3_ASSETS" ]; then
    dir=$EMAILDATA_S3_ASSETS
  fi
fi
mkdir -p "$dir"

# Several checkouts may share one cache: build under a lock, into a
# temporary name, and rename when done.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.build.lock"
  flock 9
fi

if [ ! -x "$dir/weed" ]; then
  if [ "${EMAILDATA_S3_BUILD:-1}" = 0 ]; then
    log "no weed in $dir and EMAILDATA_S3_BUILD=0"
    exit 1
  fi
  log "building SeaweedFS weed $version from the Go module proxy into $dir (first run only, several minutes)..."
  tmp=$(mktemp "$dir/.weed.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  start=$(date +%s)
  # No build tags: the optional backends (rocksdb, ydb, tikv, ...) stay out.
  (cd "$wrapper" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w" -o "$tmp" github.com/seaweedfs/seaweedfs/weed)
  mv "$tmp" "$dir/weed"
  trap - EXIT
  log "built $dir/weed in $(($(date +%s) - start)) s"
fi
echo "$dir/weed"
