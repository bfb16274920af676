#!/usr/bin/env bash
# Make sure a Docker daemon answers on this machine.
#
# Idempotent: if `docker info` already works, exits 0 at once. Otherwise (as
# root) installs docker.io from Debian's mirror when dockerd is missing, starts
# dockerd fully detached (it holds none of the caller's fds, so CI that captures
# our output does not wait for it), and waits for it to answer.
#
# Env: DOCKERD_WAIT_SEC (default 60)   how long to wait for the daemon
#      DOCKERD_LOG (default /var/log/agent-runner-dockerd.log)
set -euo pipefail

log() { printf 'ensure-docker: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

WAIT_SEC="${DOCKERD_WAIT_SEC:-60}"
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/agent-runner-dockerd.log}"
SOCK=/var/run/docker.sock

docker_ok() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

check_init() {
  # HostConfig.Init=true needs the daemon's init binary (docker-init).
  local init_path
  init_path="$(docker info --format '{{.InitBinary}}' 2>/dev/null || true)"
  [ -n "$init_path" ] || init_path=docker-init
  if command -v "$init_path" >/dev/null 2>&1 || [ -x "$init_path" ]; then
    return 0
  fi
  log "WARNING: '$init_path' not found: containers started with Init=true (docker run --init) will fail."
  log "         Debian's docker.io ships /usr/bin/docker-init (tini): apt-get install --reinstall -y docker.io tini"
}

if docker_ok; then
  check_init
  exit 0
fi

# shellcheck source=scripts/apt-install.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install_or_die() {
  log "apt-get install -y $*"
  apt_install "$@" || die "apt-get install $* failed"
}

if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "unix://$SOCK" ]; then
  die "DOCKER_HOST=$DOCKER_HOST does not answer (docker info fails); this script only starts the local daemon at unix://$SOCK; start the daemon DOCKER_HOST points to, or unset DOCKER_HOST"
fi

if [ "$(id -u)" != 0 ]; then
  if [ -S "$SOCK" ]; then
    die "a Docker socket exists at $SOCK but 'docker info' fails for user $(id -un): add the user to the 'docker' group (then log in again) or run as root"
  fi
  die "no Docker daemon is running and this script is not root, so it cannot start one. Run 'sudo bash scripts/ensure-docker.sh', or start Docker yourself (e.g. 'sudo systemctl start docker'), then retry."
fi

if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
  # docker.io brings dockerd, containerd, runc, the docker CLI and docker-init (tini).
  apt_install_or_die docker.io
  command -v dockerd >/dev/null 2>&1 || die "dockerd still missing after installing docker.io"
fi
command -v docker >/dev/null 2>&1 || die "docker CLI missing"

# Serialize concurrent callers so only one starts dockerd.
if command -v flock >/dev/null 2>&1; then
  lockdir=/run; [ -w "$lockdir" ] || lockdir="${TMPDIR:-/tmp}"
  exec 8>"$lockdir/agent-runner-ensure-docker.lock"
  flock -w "$WAIT_SEC" 8 || log "warning: could not take the start lock; continuing"
  if docker_ok; then check_init; exit 0; fi
fi

if pgrep -x dockerd >/dev/null 2>&1; then
  log "dockerd is already running (pid $(pgrep -x dockerd | tr '\n' ' ')); waiting for it to answer"
else
  log "starting dockerd (log: $DOCKERD_LOG)"
  mkdir -p "$(dirname "$DOCKERD_LOG")"
  # setsid + nohup + stdio redirected + every other inherited fd closed: the
  # daemon keeps none of the caller's pipes (or our start lock) open, so a CI
  # job capturing our output does not wait for it, and it outlives our session.
  (
    for fd in "/proc/$BASHPID/fd/"*; do
      fd="${fd##*/}"
      case "$fd" in 0|1|2) ;; *) eval "exec $fd>&-" 2>/dev/null || true ;; esac
    done
    exec setsid nohup dockerd >"$DOCKERD_LOG" 2>&1 </dev/null
  ) &
  DOCKERD_PID=$!
  disown || true
fi

dockerd_alive() {
  { [ -n "${DOCKERD_PID:-}" ] && kill -0 "$DOCKERD_PID" 2>/dev/null; } || pgrep -x dockerd >/dev/null 2>&1
}

start=$SECONDS
while :; do
  if [ -S "$SOCK" ] && docker info >/dev/null 2>&1; then
    break
  fi
  if (( SECONDS - start >= WAIT_SEC )); then
    log "dockerd did not answer within ${WAIT_SEC}s; last lines of $DOCKERD_LOG:"
    tail -n 30 "$DOCKERD_LOG" >&2 2>/dev/null || true
    die "Docker daemon failed to start (see $DOCKERD_LOG)"
  fi
  if ! dockerd_alive; then
    log "dockerd exited; last lines of $DOCKERD_LOG:"
    tail -n 30 "$DOCKERD_LOG" >&2 2>/dev/null || true
    die "Docker daemon failed to start (see $DOCKERD_LOG)"
  fi
  sleep 0.5
done
log "Docker daemon is up after $(( SECONDS - start ))s ($(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}' 2>/dev/null || echo '?'))"
check_init
