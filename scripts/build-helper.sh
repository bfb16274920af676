#!/usr/bin/env bash
# Build the in-container helper (src/sandbox/docker/helper, Go) into
# build/agent-runner-sandboxd: a static binary (CGO off, standard library
# only, -trimpath) that every sandbox container runs from a read-only bind
# mount (docs/sandbox-helper.md). Built from this repository's source, never
# downloaded. Idempotent and fast when nothing changed (Go's build cache).
#
# Needs Go >= 1.19: Debian's golang-go. As root with apt-get, installs it when
# missing (make setup runs this); otherwise says what to install.
#
# Env: GOARCH  target architecture (default: the Docker daemon's, else the host's)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOURCE="$ROOT/src/sandbox/docker/helper"
OUTPUT="$ROOT/build/agent-runner-sandboxd"

log() { printf 'build-helper: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if ! command -v go >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing golang-go (Debian's Go toolchain) to build the sandbox helper"
    # shellcheck source=scripts/apt-install.sh
    . "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
    apt_install golang-go || die "apt-get install golang-go failed"
  else
    die "Go is not installed; the sandbox helper is built from source with it: install Debian's golang-go (sudo apt-get install golang-go), or Go >= 1.19 from your distribution, then re-run make setup"
  fi
fi

if [ -z "${GOARCH:-}" ]; then
  # The containers run on the Docker daemon's machine.
  case "$(docker info --format '{{.Architecture}}' 2>/dev/null || true)" in
    x86_64|amd64) export GOARCH=amd64 ;;
    aarch64|arm64) export GOARCH=arm64 ;;
    *) ;;
  esac
fi

mkdir -p "$ROOT/build"
# No cgo: a static binary, and Go's syscall.Setresuid/Setgroups then apply to
# every thread of the helper (AllThreadsSyscall refuses to run with cgo).
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off
export GOCACHE="${GOCACHE:-$ROOT/build/go-cache}"
TEMPORARY="$OUTPUT.$$"
trap 'rm -f "$TEMPORARY"' EXIT
(cd "$SOURCE" && go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o "$TEMPORARY" .)
chmod 0755 "$TEMPORARY"
if [ -f "$OUTPUT" ] && cmp -s "$TEMPORARY" "$OUTPUT"; then
  exit 0
fi
mv -f "$TEMPORARY" "$OUTPUT"
log "built $OUTPUT ($(go version | awk '{print $3}'), $(stat -c %s "$OUTPUT") bytes)"
