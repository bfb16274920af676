/**
 * The shell command of a tool that searches with ripgrep (grep, glob): the
 * ripgrep pipeline when the image has `rg`; otherwise the runner's sandbox
 * helper answers it (`$RUNNER_SANDBOX_HELPER grep|glob`, which gives the
 * pipeline's output itself: docs/sandbox-helper.md); with neither (a sandbox
 * the Docker provider did not start), a message naming what is missing
 * (exit 127) instead of a pipeline that silently finds nothing.
 *
 * rg is kept where present: it searches on every core, and on large trees it
 * is faster than the helper (bench/search.bench.ts).
 */
export function searchCommand(tool: "grep" | "glob", ripgrepPipeline: string): string {
  return (
    `if command -v rg >/dev/null 2>&1; then ${ripgrepPipeline}; ` +
    `elif [ -n "$RUNNER_SANDBOX_HELPER" ] && [ -x "$RUNNER_SANDBOX_HELPER" ]; then exec "$RUNNER_SANDBOX_HELPER" ${tool}; ` +
    `else echo "${tool} needs ripgrep (rg) in the sandbox image, which this image does not have: install ripgrep in the image, or use run_shell with grep or find" >&2; exit 127; fi`
  );
}
