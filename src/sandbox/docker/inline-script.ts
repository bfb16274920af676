/** Environment variable carrying a script for {@link inlineScriptCommand}. */
export const INLINE_SCRIPT_VARIABLE = "RUNNER_INLINE_SCRIPT";

/**
 * `node -e` running the script in {@link INLINE_SCRIPT_VARIABLE} (the egress
 * proxy, in the runner's own image), which it first removes from its
 * environment; `ps` shows this short command, not the script.
 */
export function inlineScriptCommand(): string[] {
  return ["node", "-e", `const source = process.env.${INLINE_SCRIPT_VARIABLE}; delete process.env.${INLINE_SCRIPT_VARIABLE}; eval(source);`];
}
