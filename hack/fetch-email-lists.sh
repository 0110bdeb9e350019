#!/usr/bin/env bash
# Refreshes the embedded email classification lists in internal/engine/emaillists/data/
# from pinned npm packages:
#
#   disposable.txt  <- disposable-email-domains  (index.json + wildcard.json)
#   free.txt        <- free-email-domains        (domains.json)
#   role.txt        <- role-based-email-addresses (src/index.js, string literals)
#
# and rewrites internal/engine/emaillists/data/SOURCES.md. dangerous.txt is ours and is
# not touched.
#
# Each tarball is fetched with `npm pack <name>@<version>` and checked against
# the pinned dist.integrity and the expected licence before anything is
# written. Package code is never executed: JSON is parsed as data and the role
# list's JavaScript source is read as text.
#
# To move to a newer release: `npm view <name> version license dist.integrity`,
# update the pin below, run this script, review the diff (and the licence),
# run `go test ./internal/engine/emaillists/...`, commit.
#
# Needs: npm (and so node) and go. Normalisation is done in Go by
# internal/engine/emaillists/internal/listgen, with the same rules as LoadExtra.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="$root/internal/engine/emaillists/data"
today=$(date -u +%Y-%m-%d)

# name|version|expected licence|dist.integrity
pins=(
  "disposable-email-domains|1.0.62|MIT|sha512-LBQvhRw7mznQTPoyZbsmYeNOZt1pN5aCsx4BAU/3siVFuiM9f2oyKzUaB8v1jbxFjE3aYqYiMo63kAL4pHgfWQ=="
  "free-email-domains|1.12.6|MIT|sha512-xMhrsOFOamJTx5URT+Zej83eVyoHLntZCNwXiZXkW6tYSF2Y6eVZLAOZ1u6jqFeLXRu3yJgzr3R29ChLIvt4LA=="
  "role-based-email-addresses|3.1.0|MIT|sha512-3WfsnBtdfOqZNm7UcNhZdWz9LiG6XCeJsg/i2Bl8cW455Gk6L0lajFgOTLnDNHx6x07wvmxrNglP57+RQFOjXQ=="
)

for tool in npm node go sha1sum; do
  command -v "$tool" >/dev/null || { echo "fetch-email-lists: $tool not found" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

# fetch NAME VERSION LICENCE INTEGRITY: packs and unpacks into $tmp/NAME/package,
# verifying the integrity and the licence. Prints the shasum (sha1) to stdout.
fetch() {
  local name=$1 version=$2 licence=$3 integrity=$4
  local dir="$tmp/$name"
  mkdir -p "$dir"
  # npm writes the tarball name on stdout; notices go to stderr.
  local tgz
  tgz=$(cd "$dir" && npm pack --silent --ignore-scripts "$name@$version" 2>"$dir/npm.log" | tail -n 1) || true
  if [ -z "$tgz" ] || [ ! -f "$dir/$tgz" ]; then
    cat "$dir/npm.log" >&2
    echo "fetch-email-lists: npm pack $name@$version produced no tarball" >&2
    exit 1
  fi
  local got
  got="sha512-$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$dir/$tgz")"
  if [ "$got" != "$integrity" ]; then
    echo "fetch-email-lists: $name@$version integrity mismatch: got $got, pinned $integrity" >&2
    exit 1
  fi
  local registry_integrity
  registry_integrity=$(npm view "$name@$version" dist.integrity 2>/dev/null)
  if [ "$registry_integrity" != "$integrity" ]; then
    echo "fetch-email-lists: $name@$version: registry reports integrity $registry_integrity, pinned $integrity" >&2
    exit 1
  fi
  tar -xzf "$dir/$tgz" -C "$dir"
  local pkg_licence registry_licence
  pkg_licence=$(node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).license))' "$dir/package/package.json")
  registry_licence=$(npm view "$name@$version" license 2>/dev/null)
  if [ "$pkg_licence" != "$licence" ] || [ "$registry_licence" != "$licence" ]; then
    echo "fetch-email-lists: $name@$version licence is '$pkg_licence' (package.json) / '$registry_licence' (registry), expected '$licence'; review before updating the pin" >&2
    exit 1
  fi
  sha1sum "$dir/$tgz" | cut -d' ' -f1
}

# listgen normalises the entries with the rules LoadExtra applies to operator
# files (internal/engine/emaillists/internal/norm), drops public suffixes, sorts,
# deduplicates and writes the file with its header.
go build -o "$tmp/listgen" ./internal/engine/emaillists/internal/listgen
gen() { # listgen arguments; its report goes to stderr and to SOURCES.md
  "$tmp/listgen" "$@" 2>"$tmp/gen.log" || { cat "$tmp/gen.log" >&2; exit 1; }
  cat "$tmp/gen.log" >&2
  cat "$tmp/gen.log" >>"$tmp/dropped.log"
}
: >"$tmp/dropped.log"

declare -A shasum version licence integrity taken
for pin in "${pins[@]}"; do
  IFS='|' read -r name ver lic integ <<<"$pin"
  echo "fetching $name@$ver" >&2
  shasum[$name]=$(fetch "$name" "$ver" "$lic" "$integ")
  version[$name]=$ver
  licence[$name]=$lic
  integrity[$name]=$integ
done

p="$tmp/disposable-email-domains/package"
[ -f "$p/index.json" ] && [ -f "$p/wildcard.json" ] || { echo "fetch-email-lists: disposable-email-domains layout changed (index.json/wildcard.json)" >&2; exit 1; }
taken[disposable-email-domains]="index.json, wildcard.json"
gen -kind domain -o "$out/disposable.txt" -subdomains \
  -header "disposable-email-domains ${version[disposable-email-domains]} (${licence[disposable-email-domains]}) from npm, index.json + wildcard.json, fetched $today by hack/fetch-email-lists.sh" \
  -wildcard "$p/wildcard.json" "$p/index.json"

p="$tmp/free-email-domains/package"
[ -f "$p/domains.json" ] || { echo "fetch-email-lists: free-email-domains layout changed (domains.json)" >&2; exit 1; }
taken[free-email-domains]="domains.json"
gen -kind domain -o "$out/free.txt" \
  -header "free-email-domains ${version[free-email-domains]} (${licence[free-email-domains]}) from npm, domains.json, fetched $today by hack/fetch-email-lists.sh" \
  "$p/domains.json"

p="$tmp/role-based-email-addresses/package"
[ -f "$p/src/index.js" ] || { echo "fetch-email-lists: role-based-email-addresses layout changed (src/index.js)" >&2; exit 1; }
taken[role-based-email-addresses]="src/index.js (string literals of MARKETING, NOTIFICATION, MEETING, OTHER)"
gen -kind local -o "$out/role.txt" \
  -header "role-based-email-addresses ${version[role-based-email-addresses]} (${licence[role-based-email-addresses]}) from npm, src/index.js, fetched $today by hack/fetch-email-lists.sh" \
  "$p/src/index.js"

{
  echo "# Sources of the embedded lists"
  echo
  echo "Generated by \`hack/fetch-email-lists.sh\` on $today; do not edit by hand."
  echo "\`dangerous.txt\` is written by this project (see docs/data-sources.md)."
  echo
  echo "| file | npm package | version | licence | files taken | dist.integrity | dist.shasum |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  for pair in disposable.txt:disposable-email-domains free.txt:free-email-domains role.txt:role-based-email-addresses; do
    f=${pair%%:*} n=${pair#*:}
    echo "| $f | $n | ${version[$n]} | ${licence[$n]} | ${taken[$n]} | \`${integrity[$n]}\` | \`${shasum[$n]}\` |"
  done
  echo
  echo "Normalisation (internal/engine/emaillists/internal/listgen, the rules LoadExtra applies"
  echo "to operator files): entries lower-cased and trimmed, \`*.\` prefixes removed,"
  echo "internationalised domains converted to ASCII (punycode), entries that are not a"
  echo "valid domain (or local part) dropped, sorted bytewise and deduplicated. Domains"
  echo "that are ICANN public suffixes (e.g. edu.pl) are dropped. From disposable.txt,"
  echo "private public suffixes (e.g. za.com) are dropped too unless listed in the"
  echo "package's wildcard.json: a disposable domain covers its subdomains, which under"
  echo "a public suffix belong to unrelated registrants."
  echo
  echo "Report of this run (entries dropped, counts):"
  echo
  echo '```'
  cat "$tmp/dropped.log"
  echo '```'
  echo
  echo "The packages' licence texts: disposable-email-domains and role-based-email-addresses"
  echo "declare MIT in package.json (the disposable list's README carries the MIT notice);"
  echo "free-email-domains ships LICENSE.md (MIT, (c) Kiko Beats)."
} >"$out/SOURCES.md"
echo "wrote ${out#"$root"/}/SOURCES.md" >&2
