/**
 * Where a container sees the in-container helper (docs/sandbox-helper.md),
 * bind-mounted read-only; next to the git metadata (/run/agent-runner/git),
 * a path no image uses.
 */
export const HELPER_CONTAINER_PATH = "/run/agent-runner/agent-runner-sandboxd";
