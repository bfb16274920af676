#!/usr/bin/env bash
# Host packages the tests need beyond `make setup`: Debian's busybox-static,
# whose static /bin/busybox the any-image tests copy into a `FROM scratch`
# image (tests/helpers/test-images.ts). As root with apt-get, installs it when
# missing; otherwise says what to install. Idempotent.
set -euo pipefail

log() { printf 'ensure-test-deps: %s\n' "$*" >&2; }

# A dynamically linked binary names its ELF interpreter (ld-linux, ld-musl).
if [ -x /bin/busybox ] && ! LC_ALL=C grep -aq -e '/ld-linux' -e '/ld-musl' /bin/busybox; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  log "installing busybox-static (a static /bin/busybox for the FROM scratch test image)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q --no-install-recommends busybox-static >&2
  exit 0
fi
log "ERROR: the tests need a static /bin/busybox: install Debian's busybox-static (sudo apt-get install busybox-static)"
exit 1
