#!/usr/bin/env bash
# Hands objects that exist in the cluster to a Helm release, so that
# `helm install RELEASE charts/emaildata -n NAMESPACE` takes them over
# instead of refusing them (Helm adopts an object that carries the label
# app.kubernetes.io/managed-by=Helm and the annotations
# meta.helm.sh/release-name and meta.helm.sh/release-namespace naming the
# release). docs/install.md, "Upgrades and adoption", says when to use it.
#
#   hack/helm-adopt.sh RELEASE NAMESPACE
#       Everything `kubectl apply -k config/default` made, except the
#       Namespace (the chart does not render it by default): to move an
#       installation made with kustomize to Helm. RELEASE must be
#       "emaildata" and NAMESPACE the kustomization's (emaildata-system),
#       so that the chart's object names are those kustomize made.
#   hack/helm-adopt.sh -k DIR RELEASE NAMESPACE
#       The same for your own kustomization (an overlay of config/default).
#   hack/helm-adopt.sh --crds RELEASE NAMESPACE
#       Only the CRDs: kept by an uninstalled release (crds.keep), they
#       still name it, and a release of another name or namespace would
#       refuse them.
#
# It only labels and annotates objects that exist (a missing one is
# skipped and named); it changes nothing else and deletes nothing. kubectl
# uses the current context (or KUBECONFIG).
set -euo pipefail

usage() {
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

dir="$(cd "$(dirname "$0")/.." && pwd)/config/default"
crds_only=false
while [ $# -gt 0 ]; do
  case "$1" in
    --crds) crds_only=true; shift ;;
    -k) [ $# -ge 2 ] || usage; dir="$2"; shift 2 ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) echo "helm-adopt: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 2 ] || usage
release="$1"
namespace="$2"
kubectl=${KUBECTL:-kubectl}

crds=(emaillists.lists.emaildata.io purchases.lists.emaildata.io datasets.lists.emaildata.io)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if $crds_only; then
  "$kubectl" get crd "${crds[@]}" --ignore-not-found -o yaml >"$tmp/live.yaml"
else
  # Every object the kustomization renders but the Namespace.
  "$kubectl" kustomize "$dir" | awk '
    function flush() { if (doc != "" && doc !~ /(^|\n)kind: Namespace\n/) printf "---\n%s", doc; doc = "" }
    /^---$/ { flush(); next }
    { doc = doc $0 "\n" }
    END { flush() }' >"$tmp/manifest.yaml"
  # Only those that exist (an object of the kustomization missing from
  # the cluster is named and left for Helm to create).
  "$kubectl" get -f "$tmp/manifest.yaml" --ignore-not-found -o yaml >"$tmp/live.yaml"
  "$kubectl" get -f "$tmp/manifest.yaml" --ignore-not-found -o name | sort >"$tmp/live.names"
  "$kubectl" create --dry-run=client -f "$tmp/manifest.yaml" -o name | sort >"$tmp/all.names"
  comm -23 "$tmp/all.names" "$tmp/live.names" | sed 's/^/helm-adopt: not in the cluster, skipped: /' >&2
fi
n=$("$kubectl" get -f "$tmp/live.yaml" -o name 2>/dev/null | wc -l || true)
if [ "$n" -eq 0 ]; then
  echo "helm-adopt: nothing to adopt" >&2
  exit 1
fi
"$kubectl" label -f "$tmp/live.yaml" --overwrite app.kubernetes.io/managed-by=Helm >/dev/null
"$kubectl" annotate -f "$tmp/live.yaml" --overwrite \
  meta.helm.sh/release-name="$release" meta.helm.sh/release-namespace="$namespace" >/dev/null
echo "helm-adopt: $n objects now belong to Helm release $release in namespace $namespace" >&2
