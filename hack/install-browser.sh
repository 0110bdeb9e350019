#!/usr/bin/env bash
# Installs what the web console's browser test (internal/restapi,
# TestConsoleInBrowser) drives and injects:
#
#   chromium    Debian's package (apt-get install chromium; needs root),
#               run headless by chromedp from the Go test
#   axe-core    from npm, the version pinned in hack/browser/package.json
#               and package-lock.json, installed with npm ci into
#               bin/browser/node_modules (never loaded by the console itself:
#               the test injects it into the page it checks)
#
# Idempotent and quick when both are there (no apt, no npm). Prints what it
# did on stderr; stdout is two lines for callers: the Chromium binary and
# the axe.min.js path.
#
# Environment:
#   EMAILDATA_BROWSER_DIR   where axe-core is installed (default: <repo>/bin/browser)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${EMAILDATA_BROWSER_DIR:-$root/bin/browser}
axe=$dir/node_modules/axe-core/axe.min.js

say() { echo "install-browser: $*" >&2; }

chromium_bin() {
	for c in chromium chromium-browser; do
		if command -v "$c" >/dev/null 2>&1 && "$c" --headless --version >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

if ! chromium_bin >/dev/null; then
	if [ "$(id -u)" != 0 ]; then
		say "chromium is missing and installing it needs root (apt-get install chromium)"
		exit 1
	fi
	say "installing chromium (apt)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
fi

# npm ci installs exactly the lock file's versions; the copy of the two
# files in $dir is what it reads, so bin/ holds the installed tree.
if [ ! -f "$axe" ] || ! cmp -s "$root/hack/browser/package-lock.json" "$dir/package-lock.json"; then
	if ! command -v npm >/dev/null 2>&1; then
		if [ "$(id -u)" != 0 ]; then
			say "npm is missing and installing it needs root (apt-get install npm)"
			exit 1
		fi
		say "installing npm (apt)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >&2 ||
			{ apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >&2; }
	fi
	say "installing axe-core into $dir (npm ci)"
	mkdir -p "$dir"
	cp "$root/hack/browser/package.json" "$root/hack/browser/package-lock.json" "$dir/"
	(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
fi

chromium_bin
echo "$axe"
