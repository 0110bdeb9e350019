#!/usr/bin/env bash
# Installs the real mail software the test suite's real-MTA world
# (internal/kits/realmta) runs, from Debian's packages:
#
#   postfix              /usr/sbin/postfix (+ postconf, postscreen, anvil...)
#   postgrey             /usr/sbin/postgrey (greylisting policy server)
#   nsd                  /usr/sbin/nsd (authoritative DNS server)
#   exim4-daemon-light   unpacked, not installed, into bin/mail/exim4/:
#                        it conflicts with postfix as a package (both provide
#                        mail-transport-agent), so `apt-get download` +
#                        `dpkg -x`; its shared libraries are installed as
#                        ordinary packages.
#   sendmail-bin         unpacked the same way into bin/mail/sendmail/ (it
#     + sendmail-cf      conflicts with postfix too), with the m4 macros of
#                        sendmail-cf that build its sendmail.cf; m4 and its
#                        libraries are installed as packages.
#   Haraka               from npm, the versions pinned in hack/haraka/
#     + karma, limit     package.json and package-lock.json, installed with
#                        npm ci into bin/mail/haraka/node_modules (needs the
#                        machine's Node.js >= 20 and npm); redis-server
#                        (apt), which the karma and limit plugins keep their
#                        counters in.
#
# None of them is ever started as a system service: packages are installed
# with a policy-rc.d that forbids invoke-rc.d to start anything (there is no
# systemd here), Postfix's debconf answer is "No configuration" (no
# /etc/postfix/main.cf, no listener on port 25), and the script starts
# nothing. The tests start private instances on 127.0.0.0/8 with their own
# configuration, queues and logs under a temporary directory.
#
# Idempotent and quick when everything is there (no apt at all). Installing
# needs root (CI runs as root on a fresh Debian bookworm with apt reachable).
# Prints what it did on stderr; stdout is one line per unpacked program,
# name=path: exim=, sendmail=, haraka= (internal/kits/realmta reads them).
#
# Environment:
#   EMAILDATA_MAIL_DIR   where Exim and sendmail are unpacked and Haraka is
#                        installed (default: <repo>/bin/mail)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mail_dir=${EMAILDATA_MAIL_DIR:-$root/bin/mail}
exim_root=$mail_dir/exim4
exim=$exim_root/usr/sbin/exim4
sm_root=$mail_dir/sendmail
sendmail=$sm_root/usr/libexec/sendmail/sendmail
haraka_dir=$mail_dir/haraka
haraka=$haraka_dir/node_modules/Haraka/bin/haraka

say() { echo "install-mail-servers: $*" >&2; }

# Postfix is checked through postconf -d: a binary whose libraries are gone
# is as good as none.
have_postfix() { [ -x /usr/sbin/postfix ] && /usr/sbin/postconf -d mail_version >/dev/null 2>&1; }
have_postgrey() { [ -x /usr/sbin/postgrey ] && perl -MBerkeleyDB -MNet::Server -MNetAddr::IP -e1 >/dev/null 2>&1; }
have_nsd() { [ -x /usr/sbin/nsd ] && /usr/sbin/nsd -v >/dev/null 2>&1; }
have_exim() { getent passwd Debian-exim >/dev/null && [ -x "$exim" ] && "$exim" -bV -C /dev/null >/dev/null 2>&1; }
have_m4() { command -v m4 >/dev/null 2>&1; }
have_redis() { [ -x /usr/bin/redis-server ] && /usr/bin/redis-server --version >/dev/null 2>&1; }
# sendmail sleeps 60 s at start-up on a machine whose host name is not
# qualified: ask it in a UTS namespace with a qualified one (as the tests
# run it).
sendmail_version() {
  [ -x "$sendmail" ] || return 0
  unshare --uts sh -c 'hostname realmta.test && exec "$0" -d0.1 -bt -C /dev/null' "$sendmail" </dev/null 2>/dev/null |
    sed -n 's/^Version \([0-9.]*\).*/\1/p'
}
have_sendmail() { [ -x "$sendmail" ] && [ -n "$(sendmail_version)" ] && [ -f "$sm_root/usr/share/sendmail/cf/m4/cf.m4" ]; }
node_ok() { command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge 20 ]; }
have_haraka() {
  node_ok && [ -f "$haraka" ] && cmp -s "$root/hack/haraka/package-lock.json" "$haraka_dir/package-lock.json" &&
    [ -d "$haraka_dir/node_modules/haraka-plugin-karma" ] && [ -d "$haraka_dir/node_modules/haraka-plugin-limit" ]
}

outputs() {
  echo "exim=$exim"
  echo "sendmail=$sendmail"
  echo "haraka=$haraka"
}

check() {
  missing=()
  have_postfix || missing+=(postfix)
  have_postgrey || missing+=(postgrey)
  have_nsd || missing+=(nsd)
  have_m4 || missing+=(m4)
  have_redis || missing+=(redis-server)
  if [ ${#missing[@]} -eq 0 ] && have_exim && have_sendmail && have_haraka; then
    say "postfix $(/usr/sbin/postconf -dh mail_version), postgrey, nsd, redis, exim ($exim), sendmail $(sendmail_version) and haraka ($haraka) already installed"
    outputs
    exit 0
  fi
}
check

if [ "$(id -u)" != 0 ]; then
  say "missing: ${missing[*]:-} $(have_exim || echo exim4-daemon-light) $(have_sendmail || echo sendmail-bin) $(have_haraka || echo Haraka); run as root: sudo $0"
  exit 1
fi

# Test binaries of several packages may call this at once: one installs,
# the others wait and find everything there.
mkdir -p "$mail_dir"
exec 9>"$mail_dir/.install.lock"
flock 9
check

export DEBIAN_FRONTEND=noninteractive
apt_get() { apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"; }

updated=
apt_update() {
  if [ -z "$updated" ]; then
    say "apt-get update"
    apt-get -q update >&2
    updated=1
  fi
}

# Forbid invoke-rc.d to start services while packages are configured; an
# existing policy is put back afterwards.
policy=/usr/sbin/policy-rc.d
backup=
policy_set=
restore_policy() {
  if [ -n "$backup" ]; then mv -f "$backup" "$policy"; else rm -f "$policy"; fi
}
install_policy() {
  [ -z "$policy_set" ] || return 0
  policy_set=1
  if [ -e "$policy" ]; then
    backup=$(mktemp "$policy.emaildata.XXXXXX")
    cp -p "$policy" "$backup"
  fi
  trap restore_policy EXIT
  printf '#!/bin/sh\n# hack/install-mail-servers.sh: start no service while installing.\nexit 101\n' >"$policy"
  chmod 755 "$policy"
}

if [ ${#missing[@]} -gt 0 ]; then
  install_policy
  # Postfix: no configuration (no main.cf, no system listener).
  echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  apt_update
  say "apt-get install ${missing[*]}"
  apt_get install --no-install-recommends "${missing[@]}" >&2
fi

# unpack PKG DIR [EXTRA...]: `apt-get download` PKG (and EXTRA packages,
# unpacked alongside), `dpkg -x` them into DIR, and install PKG's
# libraries as ordinary packages, less the packages in $skip_deps (which
# would pull in the conflicting package itself).
unpack() {
  local pkg=$1 dir=$2
  shift 2
  install_policy
  apt_update
  local tmp
  tmp=$(mktemp -d)
  chown _apt "$tmp" 2>/dev/null || chmod 1777 "$tmp" # apt downloads as _apt
  say "apt-get download $pkg${*:+ $*}; dpkg -x into $dir"
  (cd "$tmp" && apt-get -q download "$pkg" "$@" >&2)
  local deb libs
  deb=$(ls "$tmp"/"${pkg}"_*.deb)
  libs=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g' |
    grep -v -E "^(${skip_deps})?\$" || true)
  if [ -n "$libs" ]; then
    say "apt-get install $(echo $libs)"
    # shellcheck disable=SC2086
    apt_get install --no-install-recommends $libs >&2
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  for d in "$tmp"/*.deb; do dpkg -x "$d" "$dir"; done
  rm -rf "$tmp"
}

if ! have_exim; then
  # Its libraries, less exim4-base (which would pull the package in) and
  # debconf (already there).
  skip_deps='exim4-base|debconf|debconf-2.0'
  unpack exim4-daemon-light "$exim_root"
  # The binary looks up its compiled-in user by name at start-up; the
  # package's exim4-base would create it.
  if ! getent passwd Debian-exim >/dev/null; then
    say "adduser --system Debian-exim (Exim's compiled-in user)"
    adduser --system --group --quiet --allow-bad-names --no-create-home --home /nonexistent Debian-exim >&2
  fi
  if ! have_exim; then
    say "unpacked $exim but it does not run:"
    "$exim" -bV -C /dev/null >&2 || true
    exit 1
  fi
fi

if ! have_sendmail; then
  # sendmail-base and sendmail-cf are what the package would pull in (the
  # first holds only Debian's scripts; the second is unpacked beside the
  # binary).
  skip_deps='sendmail-base|sendmail-cf|debconf|debconf-2.0'
  unpack sendmail-bin "$sm_root" sendmail-cf
  if ! have_sendmail; then
    say "unpacked $sendmail but it does not run:"
    "$sendmail" -d0.1 -bt -C /dev/null </dev/null >&2 || true
    exit 1
  fi
fi

# npm ci installs exactly the lock file's versions (less Haraka's optional
# plugins: the world runs karma and limit, which package.json names); the
# copy of the two files in $haraka_dir is what it reads.
if ! have_haraka; then
  if ! node_ok; then
    say "Haraka needs Node.js >= 20 and npm; found $(node --version 2>/dev/null || echo none)"
    exit 1
  fi
  say "installing Haraka into $haraka_dir (npm ci)"
  mkdir -p "$haraka_dir"
  cp "$root/hack/haraka/package.json" "$root/hack/haraka/package-lock.json" "$haraka_dir/"
  (cd "$haraka_dir" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  if ! have_haraka; then
    say "npm ci ran but $haraka is not there"
    exit 1
  fi
fi

# The packages must not have left a system instance running (no policy can
# stop a postinst that starts a daemon by hand).
if [ -e /etc/postfix/main.cf ] && /usr/sbin/postfix status >/dev/null 2>&1; then
  say "warning: a system Postfix is running (not started by this script); left alone"
fi

say "ready: postfix $(/usr/sbin/postconf -dh mail_version), postgrey, $(/usr/sbin/nsd -v 2>&1 | head -1), exim $("$exim" -bV -C /dev/null 2>/dev/null | sed -n 's/^Exim version \([^ ]*\).*/\1/p'), sendmail $(sendmail_version), $(/usr/bin/redis-server --version | cut -d' ' -f1-3), haraka $(node -p "require('$haraka_dir/node_modules/Haraka/package.json').version")"
outputs
