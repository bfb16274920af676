/** Environment variable carrying a script for {@link inlineScriptCommand}. */
export const INLINE_SCRIPT_VARIABLE = "RUNNER_INLINE_SCRIPT";

/** Environment variables telling the sandbox daemon which uid and gid its commands run as. */
export const SANDBOX_UID_VARIABLE = "RUNNER_SANDBOX_UID";
export const SANDBOX_GID_VARIABLE = "RUNNER_SANDBOX_GID";

/**
 * `node -e` running the script in {@link INLINE_SCRIPT_VARIABLE}, which it
 * first removes from its environment so the processes it starts do not
 * inherit it; `ps` shows this short command, not the script.
 */
export function inlineScriptCommand(): string[] {
  return ["node", "-e", `const source = process.env.${INLINE_SCRIPT_VARIABLE}; delete process.env.${INLINE_SCRIPT_VARIABLE}; eval(source);`];
}
