#!/usr/bin/env bash
# Debian 11's git (2.30, older than 2.31: it ignores GIT_CONFIG_COUNT but has
# the repository-ownership check), as a .deb for the old-git test image
# (tests/helpers/test-images.ts OLD_GIT_IMAGE): the sandbox's git must work in
# images whose git predates 2.31 (docs/images.md). Downloaded once from the
# Debian mirror the host's own apt sources name (never a hard-coded one), with
# a private apt state, into $AGENT_RUNNER_TEST_CACHE (default
# /var/cache/agent-runner-tests). Idempotent; prints the .deb's path.
set -euo pipefail

log() { printf 'fetch-old-git: %s\n' "$*" >&2; }

cache=${AGENT_RUNNER_TEST_CACHE:-/var/cache/agent-runner-tests}
target="$cache/git-bullseye.deb"
if [ -s "$target" ]; then
  echo "$target"
  exit 0
fi
# The mirror of the host's Debian suite (not -security, not -updates): its URI serves every suite.
mirror=$(apt-get indextargets --format '$(REPO_URI) $(CODENAME)' 'Identifier: Packages' 2>/dev/null | awk '$2 ~ /^[a-z]+$/ {print $1; exit}')
if [ -z "$mirror" ]; then
  log "ERROR: no Debian mirror in the host's apt sources (apt-get indextargets); add one, or put Debian 11's git .deb at $target"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$cache"
echo "deb $mirror bullseye main" >"$work/sources.list"
apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none" -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "APT::Sandbox::User=root")
log "downloading Debian 11's git from $mirror"
apt-get "${apt[@]}" -qq update
version=$(apt-cache "${apt[@]}" madison git | awk -F'|' '$3 ~ /bullseye/ {gsub(/ /, "", $2); print $2; exit}')
if [ -z "$version" ]; then
  log "ERROR: $mirror has no git for bullseye"
  exit 1
fi
(cd "$work" && apt-get "${apt[@]}" -qq download "git=$version")
mv "$work"/git_*.deb "$target.new"
mv "$target.new" "$target"
echo "$target"
