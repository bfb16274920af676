/**
 * A shell prefix for the tools that run ripgrep inside the sandbox (grep,
 * glob): in an image without `rg` the command fails (exit 127) with a message
 * naming what is missing, instead of a pipeline that silently finds nothing.
 */
export function requireRipgrep(tool: string): string {
  return `command -v rg >/dev/null 2>&1 || { echo "${tool} needs ripgrep (rg) in the sandbox image, which this image does not have: install ripgrep in the image, or use run_shell with grep or find" >&2; exit 127; }; `;
}
