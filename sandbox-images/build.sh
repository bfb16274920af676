#!/usr/bin/env bash
# Build the agent-runner sandbox image (default tag agent-runner/sandbox:bookworm).
#
#   sandbox-images/build.sh [--force] [--tag TAG] [--offline] [--rebuild-base]
#
#   --force         rebuild (without the layer cache) even if TAG is up to date
#   --tag TAG       image tag to build (default agent-runner/sandbox:bookworm)
#   --offline       do not try `docker pull debian:bookworm-slim`
#   --rebuild-base  re-run debootstrap even if agent-runner/base:bookworm exists
#
# Fast path: if TAG exists and its agent-runner.image-version label equals the
# one in the Dockerfile, prints "sandbox image TAG is up to date" and exits 0.
#
# Base image, first that works:
#   1. docker pull debian:bookworm-slim (short timeout; fails at once without a registry)
#   2. a local debian:bookworm-slim image
#   3. agent-runner/base:bookworm, made here if missing: debootstrap --variant=minbase
#      bookworm from the Debian mirror in apt's sources, then `docker import`.
# The Dockerfile's apt step then runs on the default bridge network against the
# mirror in the base's sources.list.
#
# Needs a running Docker daemon (bash scripts/ensure-docker.sh); building the
# offline base needs root (debootstrap) and installs debootstrap if missing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DOCKERFILE="$HERE/Dockerfile"
TAG="agent-runner/sandbox:bookworm"
UPSTREAM_BASE="debian:bookworm-slim"
LOCAL_BASE="agent-runner/base:bookworm"
SUITE="bookworm"
PULL_TIMEOUT="${SANDBOX_PULL_TIMEOUT:-20}"
FORCE=0
OFFLINE=0
REBUILD_BASE=0

log() { printf '[sandbox-images] %s\n' "$*" >&2; }
die() { printf '[sandbox-images] ERROR: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1 ;;
    --tag) [ $# -ge 2 ] || die "--tag needs a value"; TAG="$2"; shift ;;
    --tag=*) TAG="${1#--tag=}" ;;
    --offline) OFFLINE=1 ;;
    --rebuild-base) REBUILD_BASE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done
[ -n "$TAG" ] || die "--tag must not be empty"
[ -f "$DOCKERFILE" ] || die "missing $DOCKERFILE"

command -v docker >/dev/null 2>&1 || die "docker CLI not found; run: bash scripts/ensure-docker.sh"
if ! DOCKER_ERR="$(docker info 2>&1 >/dev/null)"; then
  log "docker info: $(printf '%s\n' "$DOCKER_ERR" | grep -v '^$' | tail -n 1)"
  die "the Docker daemon does not answer; run: bash scripts/ensure-docker.sh (as root), or fix access to the Docker socket"
fi

WANT_VERSION="$(sed -n 's/.*agent-runner\.image-version="\{0,1\}\([0-9][0-9]*\)"\{0,1\}.*/\1/p' "$DOCKERFILE" | head -n1)"
[ -n "$WANT_VERSION" ] || die "no agent-runner.image-version label found in $DOCKERFILE"

image_label() { # image label -> value ("" if image or label missing)
  docker image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null | sed 's/^<no value>$//' || true
}
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# ---- fast path --------------------------------------------------------------
if [ "$FORCE" = 0 ] && image_exists "$TAG"; then
  HAVE_VERSION="$(image_label "$TAG" agent-runner.image-version)"
  if [ "$HAVE_VERSION" = "$WANT_VERSION" ]; then
    echo "sandbox image $TAG is up to date"
    exit 0
  fi
  log "$TAG has image-version '${HAVE_VERSION:-none}', Dockerfile has $WANT_VERSION: rebuilding"
fi

# One build at a time on this machine (two `make setup` in parallel).
if command -v flock >/dev/null 2>&1; then
  LOCK="${TMPDIR:-/tmp}/agent-runner-sandbox-build.$(id -u).lock"
  exec 9>"$LOCK"
  if ! flock -n 9; then
    log "another sandbox build is running; waiting for it"
    flock 9
    if [ "$FORCE" = 0 ] && [ "$(image_label "$TAG" agent-runner.image-version)" = "$WANT_VERSION" ]; then
      echo "sandbox image $TAG is up to date"
      exit 0
    fi
  fi
fi

T_ALL=$SECONDS
PHASE_NAME="" PHASE_T0=0
phase_begin() { PHASE_NAME="$1"; PHASE_T0=$SECONDS; log "phase '$1' ..."; }
phase_end() { log "phase '$PHASE_NAME' took $(( SECONDS - PHASE_T0 ))s"; }

# ---- apt helpers (host) -----------------------------------------------------
# shellcheck source=scripts/apt-install.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/apt-install.sh"
apt_install_as_root() {
  [ "$(id -u)" = 0 ] || die "need root to install $* (or install it yourself)"
  apt_install "$@" || die "apt-get install $* failed"
}

# The main Debian archive URI from apt's configured sources (deb822 .sources
# files first, then one-line .list files), else $DEBIAN_MIRROR; never a
# hard-coded host (a team behind a company mirror needs its own).
# $1 = "main" (suite like bookworm) or "security" (suite like bookworm-security).
apt_source_uri() {
  local want="$1" f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri="$(awk -v want="$want" '
      BEGIN { RS=""; FS="\n" }
      {
        types=""; uris=""; suites=""; comps=""; enabled="yes"
        for (i = 1; i <= NF; i++) {
          line = $i
          if (line ~ /^[ \t]*#/) continue
          if (line ~ /^Types:/)      { sub(/^Types:[ \t]*/, "", line); types = line }
          if (line ~ /^URIs:/)       { sub(/^URIs:[ \t]*/, "", line); uris = line }
          if (line ~ /^Suites:/)     { sub(/^Suites:[ \t]*/, "", line); suites = " " line " " }
          if (line ~ /^Components:/) { sub(/^Components:[ \t]*/, "", line); comps = " " line " " }
          if (line ~ /^Enabled:/)    { sub(/^Enabled:[ \t]*/, "", line); enabled = tolower(line) }
        }
        if (enabled == "no" || types !~ /(^| )deb( |$)/ || comps !~ / main /) next
        split(uris, u, /[ \t]+/)
        if (u[1] !~ /^https?:\/\//) next
        if (want == "main" && suites ~ / [a-z]+ / && u[1] !~ /security/) { print u[1]; exit }
        if (want == "security" && suites ~ / [a-z]+-security /) { print u[1]; exit }
      }' "$f")"
    if [ -n "$uri" ]; then echo "${uri%/}"; return 0; fi
  done
  local lists=()
  [ -f /etc/apt/sources.list ] && lists+=(/etc/apt/sources.list)
  for f in /etc/apt/sources.list.d/*.list; do [ -f "$f" ] && lists+=("$f"); done
  if [ "${#lists[@]}" -gt 0 ]; then
    uri="$(sed -n 's/^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\{0,1\}//p' "${lists[@]}" \
      | awk -v want="$want" '
          $1 !~ /^https?:\/\// { next }
          want == "main" && $2 ~ /^[a-z]+$/ && $1 !~ /security/ { print $1; exit }
          want == "security" && $2 ~ /^[a-z]+-security$/ { print $1; exit }')"
    if [ -n "$uri" ]; then echo "${uri%/}"; return 0; fi
  fi
  if [ "$want" = main ]; then echo "${DEBIAN_MIRROR:-}"; else echo ""; fi
}

url_ok() { # quick reachability probe of a mirror file (only ever the Debian mirror)
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -m 10 -o /dev/null "$1" 2>/dev/null
  elif command -v wget >/dev/null 2>&1; then
    wget -q -T 10 -t 1 -O /dev/null "$1" 2>/dev/null
  else
    return 0 # cannot probe; assume reachable
  fi
}

# ---- offline base: debootstrap + docker import --------------------------------
ROOTFS=""
cleanup_rootfs() {
  [ -n "$ROOTFS" ] && [ -d "$ROOTFS" ] || return 0
  # debootstrap mounts proc/sys inside the target; never rm -rf through a mount.
  local m
  awk -v r="$ROOTFS" 'index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r \
    | while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$ROOTFS" || log "warning: could not remove $ROOTFS"
  ROOTFS=""
}
CONTEXT=""
cleanup() {
  cleanup_rootfs
  if [ -n "$CONTEXT" ]; then rm -rf "$CONTEXT"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build_local_base() {
  [ "$(id -u)" = 0 ] || die "no base image available ($UPSTREAM_BASE cannot be pulled) and building the offline base ($LOCAL_BASE) with debootstrap needs root: run 'sudo bash sandbox-images/build.sh'"
  if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    apt_install_as_root debootstrap
  fi
  local mirror sec sources
  mirror="$(apt_source_uri main)"
  [ -n "$mirror" ] || die "no Debian mirror in apt's sources (/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list): add yours there, or set DEBIAN_MIRROR=http://<your mirror>/debian"
  sec="$(apt_source_uri security)"
  if [ -z "$sec" ] && [ "${mirror%/debian}" != "$mirror" ]; then sec="${mirror}-security"; fi
  log "Debian mirror: $mirror${sec:+ (security: $sec)}"

  ROOTFS="$(mktemp -d /var/tmp/agent-runner-rootfs.XXXXXX)"
  chmod 755 "$ROOTFS"
  local extra=()
  case "$mirror" in https:*) extra+=(--include=ca-certificates) ;; esac

  phase_begin "debootstrap $SUITE (minbase)"
  if ! debootstrap --variant=minbase --components=main "${extra[@]}" "$SUITE" "$ROOTFS" "$mirror" \
      >"$ROOTFS.log" 2>&1; then
    tail -n 30 "$ROOTFS.log" >&2 || true
    [ -f "$ROOTFS/debootstrap/debootstrap.log" ] && tail -n 30 "$ROOTFS/debootstrap/debootstrap.log" >&2
    rm -f "$ROOTFS.log"
    die "debootstrap $SUITE from $mirror failed"
  fi
  rm -f "$ROOTFS.log"
  phase_end

  phase_begin "prepare + docker import $LOCAL_BASE"
  # apt sources for builds on top of this base: the main suite always, updates
  # and security when the mirror serves them.
  sources="deb $mirror $SUITE main"$'\n'
  if url_ok "$mirror/dists/$SUITE-updates/InRelease"; then
    sources+="deb $mirror $SUITE-updates main"$'\n'
  else
    log "note: $mirror has no $SUITE-updates; leaving it out of the base's sources.list"
  fi
  if [ -n "$sec" ] && url_ok "$sec/dists/$SUITE-security/InRelease"; then
    sources+="deb $sec $SUITE-security main"$'\n'
  else
    log "note: no reachable $SUITE-security mirror; leaving it out of the base's sources.list"
  fi
  printf '%s' "$sources" >"$ROOTFS/etc/apt/sources.list"
  rm -f "$ROOTFS"/etc/apt/sources.list.d/*

  # What Debian's official container images do: no service starts during
  # installs, no docs/man/locales, no translation indexes, no cached .debs.
  printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"
  chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"
  mkdir -p "$ROOTFS/etc/dpkg/dpkg.cfg.d" "$ROOTFS/etc/apt/apt.conf.d"
  cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  echo 'Acquire::Languages "none";' >"$ROOTFS/etc/apt/apt.conf.d/docker-no-languages"
  cat >"$ROOTFS/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  find "$ROOTFS/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete 2>/dev/null || true
  find "$ROOTFS/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  rm -rf "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* "$ROOTFS"/usr/share/locale/* \
         "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/*.bin \
         "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/log/*.log "$ROOTFS"/var/log/apt/* \
         "$ROOTFS"/tmp/* "$ROOTFS"/var/tmp/*
  : >"$ROOTFS/etc/resolv.conf"     # Docker provides these at run time
  echo localhost >"$ROOTFS/etc/hostname"

  tar --numeric-owner -C "$ROOTFS" -c \
      --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' . \
    | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' \
        --change "LABEL agent-runner.base=debootstrap-$SUITE-minbase agent-runner.base.mirror=$mirror" \
        -m "debootstrap --variant=minbase $SUITE $mirror" \
        - "$LOCAL_BASE" >/dev/null \
    || die "docker import of the debootstrap rootfs failed"
  cleanup_rootfs
  phase_end
}

# ---- choose the base ----------------------------------------------------------
BASE=""
if [ "$OFFLINE" = 0 ]; then
  phase_begin "docker pull $UPSTREAM_BASE"
  if timeout "$PULL_TIMEOUT" docker pull -q "$UPSTREAM_BASE" >/dev/null 2>&1; then
    BASE="$UPSTREAM_BASE"
  else
    log "cannot pull $UPSTREAM_BASE (no registry access?); using a local base"
  fi
  phase_end
fi
if [ -z "$BASE" ] && image_exists "$UPSTREAM_BASE"; then
  BASE="$UPSTREAM_BASE"
fi
if [ -z "$BASE" ]; then
  if [ "$REBUILD_BASE" = 1 ] || ! image_exists "$LOCAL_BASE"; then
    build_local_base
  else
    log "using existing $LOCAL_BASE (--rebuild-base to remake it)"
  fi
  BASE="$LOCAL_BASE"
fi
log "base image: $BASE"

# ---- docker build ---------------------------------------------------------------
# Without the buildx plugin the docker CLI cannot use BuildKit; use the classic
# builder explicitly instead of failing.
if [ -z "${DOCKER_BUILDKIT:-}" ] && ! docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=0
fi

# The build context: the MCP servers' package files, and the CA certificates
# this host trusts (its system bundle and NODE_EXTRA_CA_CERTS), so npm in the
# build works behind a TLS-inspecting proxy too; only a throwaway build stage
# sees them.
CONTEXT="$(mktemp -d "${TMPDIR:-/tmp}/agent-runner-sandbox-context.XXXXXX")"
cp -R "$HERE/mcp-servers" "$CONTEXT/mcp-servers"
cp "$HERE/python-bytecode.py" "$CONTEXT/python-bytecode.py"
mkdir -p "$CONTEXT/build-ca"
: >"$CONTEXT/build-ca/ca.crt"
for ca in /etc/ssl/certs/ca-certificates.crt "${NODE_EXTRA_CA_CERTS:-}"; do
  if [ -n "$ca" ] && [ -f "$ca" ]; then cat "$ca" >>"$CONTEXT/build-ca/ca.crt"; fi
done

OLD_ID="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
CACHE_ARGS=()
[ "$FORCE" = 1 ] && CACHE_ARGS+=(--no-cache)   # --force means a real rebuild (fresh packages)
phase_begin "docker build $TAG"
BUILD_LOG="$(mktemp "${TMPDIR:-/tmp}/agent-runner-sandbox-build.XXXXXX.log")"
if ! docker build \
      --network default \
      --force-rm \
      "${CACHE_ARGS[@]}" \
      --build-arg "BASE=$BASE" \
      --label "agent-runner.base=$BASE" \
      -t "$TAG" \
      -f "$DOCKERFILE" \
      "$CONTEXT" >"$BUILD_LOG" 2>&1; then
  tail -n 40 "$BUILD_LOG" >&2
  die "docker build of $TAG failed (full log: $BUILD_LOG)"
fi
rm -f "$BUILD_LOG"
phase_end

NEW_ID="$(docker image inspect --format '{{.Id}}' "$TAG")"
if [ -n "$OLD_ID" ] && [ "$OLD_ID" != "$NEW_ID" ]; then
  docker image rm "$OLD_ID" >/dev/null 2>&1 || true   # the replaced image, if unused
fi

phase_begin "smoke test"
docker run --rm --network none --user 1000:1000 "$TAG" \
    bash -c 'node --version >/dev/null && rg --version >/dev/null && python3 -m pytest --version >/dev/null 2>&1 && git --version >/dev/null && python --version >/dev/null && python3 -m venv /tmp/venv && /tmp/venv/bin/pip --version >/dev/null' \
  || die "smoke test of $TAG failed (node/rg/pytest/git/python/venv missing?)"
# The preinstalled MCP servers answer initialize and tools/list with no network.
MCP_PROBE='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"build.sh","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
docker run --rm -i --network none --user 1000:1000 "$TAG" bash -c '
    probe="$(cat)"
    for server in "mcp-server-filesystem /workspace" mcp-server-everything; do
      { printf "%s\n" "$probe"; sleep 2; } | timeout 20 $server 2>/dev/null | grep -q "\"id\":2" || { echo "$server did not list its tools" >&2; exit 1; }
    done' <<<"$MCP_PROBE" \
  || die "smoke test of $TAG failed: a preinstalled MCP server does not start"
phase_end

SIZE="$(docker image inspect --format '{{.Size}}' "$TAG" | awk '{ printf "%.0f MB", $1 / 1000 / 1000 }')"
log "built $TAG (image-version $WANT_VERSION, base $BASE, $SIZE) in $(( SECONDS - T_ALL ))s"
echo "sandbox image $TAG built"
