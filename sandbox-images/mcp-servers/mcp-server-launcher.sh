#!/bin/sh
# /usr/local/bin/mcp-server-<name> -> this script: runs the preinstalled
# bin <name> of /opt/agent-runner/mcp-servers (package-lock.json pins it).
#
# Debian bookworm's node 18 has the Web Crypto global (globalThis.crypto)
# only behind a flag (node >= 19 has it always); the MCP SDK's streamable
# HTTP server needs it (server-everything's `streamableHttp` mode). Stdio
# servers run without it too.
set -eu
name="$(basename "$0")"
entry="$(readlink -f "/opt/agent-runner/mcp-servers/node_modules/.bin/$name")"
case "$(node --version)" in
  v18.*) exec node --experimental-global-webcrypto "$entry" "$@" ;;
  *) exec node "$entry" "$@" ;;
esac
