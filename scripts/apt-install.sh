# Sourced by the set-up scripts: `apt_install PACKAGE...` installs Debian packages as root.
# Another apt or dpkg process (unattended upgrades on a shared machine, a parallel CI job) may hold
# apt's locks: wait for it instead of failing. DPkg::Lock::Timeout (apt >= 1.9.11, apt-get(8)) makes
# `install` wait for the dpkg lock; `update` takes the lists lock, which that option does not cover in
# every apt version, so it is retried while the failure is a held lock.
APT_LOCK_WAIT_SEC=${APT_LOCK_WAIT_SEC:-600}
APT_UPDATED=${APT_UPDATED:-0}

apt_update_waiting() {
  local waited=0 output
  while :; do
    if output=$(apt-get -o DPkg::Lock::Timeout="$APT_LOCK_WAIT_SEC" update -q 2>&1); then
      return 0
    fi
    if ! grep -qiE 'could not get lock|unable to lock' <<<"$output" || [ "$waited" -ge "$APT_LOCK_WAIT_SEC" ]; then
      printf '%s\n' "$output" >&2
      return 1
    fi
    [ "$waited" = 0 ] && printf 'apt: another apt process holds the package lists lock; waiting up to %s s\n' "$APT_LOCK_WAIT_SEC" >&2
    sleep 5
    waited=$((waited + 5))
  done
}

apt_install() {
  command -v apt-get >/dev/null 2>&1 || { printf 'apt-get not found; install %s by hand\n' "$*" >&2; return 1; }
  export DEBIAN_FRONTEND=noninteractive
  if [ "$APT_UPDATED" = 0 ]; then
    apt_update_waiting || { printf 'apt-get update failed\n' >&2; return 1; }
    APT_UPDATED=1
  fi
  apt-get -o DPkg::Lock::Timeout="$APT_LOCK_WAIT_SEC" install -y -q --no-install-recommends "$@" >&2
}
