#!/usr/bin/env bash
# Host packages the tests need beyond `make setup`: Debian's busybox-static,
# whose static /bin/busybox the any-image tests copy into a `FROM scratch`
# image (tests/helpers/test-images.ts), and Debian's chromium, the headless
# browser the report.html test drives through playwright-core
# (tests/helpers/chromium.ts; never a browser download), and Debian's
# nats-server, the JetStream servers the NATS tests start on loopback
# (tests/helpers/nats-cluster.ts). As root with
# apt-get, installs what is missing; otherwise says what to install. Idempotent.
set -euo pipefail

log() { printf 'ensure-test-deps: %s\n' "$*" >&2; }

missing=()
# A dynamically linked binary names its ELF interpreter (ld-linux, ld-musl).
if ! { [ -x /bin/busybox ] && ! LC_ALL=C grep -aq -e '/ld-linux' -e '/ld-musl' /bin/busybox; }; then
  missing+=(busybox-static)
fi
if [ ! -x /usr/bin/chromium ]; then
  missing+=(chromium)
fi
if [ ! -x /usr/sbin/nats-server ]; then
  missing+=(nats-server)
fi
# Debian 11's git for the old-git test image (scripts/fetch-old-git.sh), once apt-get can reach the mirror.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  bash "$(dirname "${BASH_SOURCE[0]}")/fetch-old-git.sh" >/dev/null
fi
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  log "installing ${missing[*]} (a static /bin/busybox for the FROM scratch test image; chromium for the browser tests; nats-server for the NATS tests)"
  # shellcheck source=scripts/apt-install.sh
  . "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
  apt_install "${missing[@]}"
  exit 0
fi
log "ERROR: the tests need Debian's ${missing[*]}: sudo apt-get install ${missing[*]}"
exit 1
