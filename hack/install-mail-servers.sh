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
# Prints what it did on stderr; stdout is only the Exim binary's path
# (callers use $(...)).
#
# Environment:
#   EMAILDATA_MAIL_DIR   where Exim is unpacked (default: <repo>/bin/mail)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mail_dir=${EMAILDATA_MAIL_DIR:-$root/bin/mail}
exim_root=$mail_dir/exim4
exim=$exim_root/usr/sbin/exim4

say() { echo "install-mail-servers: $*" >&2; }

# Postfix is checked through postconf -d: a binary whose libraries are gone
# is as good as none.
have_postfix() { [ -x /usr/sbin/postfix ] && /usr/sbin/postconf -d mail_version >/dev/null 2>&1; }
have_postgrey() { [ -x /usr/sbin/postgrey ] && perl -MBerkeleyDB -MNet::Server -MNetAddr::IP -e1 >/dev/null 2>&1; }
have_nsd() { [ -x /usr/sbin/nsd ] && /usr/sbin/nsd -v >/dev/null 2>&1; }
have_exim() { getent passwd Debian-exim >/dev/null && [ -x "$exim" ] && "$exim" -bV -C /dev/null >/dev/null 2>&1; }

check() {
  missing=()
  have_postfix || missing+=(postfix)
  have_postgrey || missing+=(postgrey)
  have_nsd || missing+=(nsd)
  if [ ${#missing[@]} -eq 0 ] && have_exim; then
    say "postfix $(/usr/sbin/postconf -dh mail_version), postgrey, nsd and exim ($exim) already installed"
    echo "$exim"
    exit 0
  fi
}
check

if [ "$(id -u)" != 0 ]; then
  say "missing: ${missing[*]:-} $(have_exim || echo exim4-daemon-light); run as root: sudo $0"
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

if ! have_exim; then
  install_policy
  apt_update
  tmp=$(mktemp -d)
  chown _apt "$tmp" 2>/dev/null || chmod 1777 "$tmp" # apt downloads as _apt
  say "apt-get download exim4-daemon-light; dpkg -x into $exim_root"
  (cd "$tmp" && apt-get -q download exim4-daemon-light >&2)
  deb=$(ls "$tmp"/exim4-daemon-light_*.deb)
  # Its libraries, less exim4-base (which would pull the package in) and
  # debconf (already there).
  libs=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g' |
    grep -v -E '^(exim4-base|debconf|debconf-2.0)?$' || true)
  if [ -n "$libs" ]; then
    say "apt-get install $(echo $libs)"
    # shellcheck disable=SC2086
    apt_get install --no-install-recommends $libs >&2
  fi
  # The binary looks up its compiled-in user by name at start-up; the
  # package's exim4-base would create it.
  if ! getent passwd Debian-exim >/dev/null; then
    say "adduser --system Debian-exim (Exim's compiled-in user)"
    adduser --system --group --quiet --allow-bad-names --no-create-home --home /nonexistent Debian-exim >&2
  fi
  rm -rf "$exim_root"
  mkdir -p "$exim_root"
  dpkg -x "$deb" "$exim_root"
  rm -rf "$tmp"
  if ! have_exim; then
    say "unpacked $exim but it does not run:"
    "$exim" -bV -C /dev/null >&2 || true
    exit 1
  fi
fi

# The packages must not have left a system instance running (no policy can
# stop a postinst that starts a daemon by hand).
if [ -e /etc/postfix/main.cf ] && /usr/sbin/postfix status >/dev/null 2>&1; then
  say "warning: a system Postfix is running (not started by this script); left alone"
fi

say "ready: postfix $(/usr/sbin/postconf -dh mail_version), postgrey, $(/usr/sbin/nsd -v 2>&1 | head -1), exim $("$exim" -bV -C /dev/null 2>/dev/null | sed -n 's/^Exim version \([^ ]*\).*/\1/p')"
echo "$exim"
