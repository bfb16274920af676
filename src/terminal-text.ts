/**
 * Text that reaches a terminal from the agent, the repository or a tool:
 * file names, commands, tool arguments, model text, verification output,
 * denial reasons, branch and task names, MCP tool names. Such text must not
 * drive the terminal: an escape sequence could write the clipboard (OSC 52),
 * set the window title, move the cursor to forge a "status: succeeded" line,
 * or reorder what is shown (bidirectional overrides, CVE-2021-42574 "Trojan
 * Source"). Everything the CLI prints from such text goes through
 * {@link terminalSafe} (human output) or {@link terminalSafeJson} (JSON lines).
 *
 * Made visible:
 * - C0 controls but tab and newline (ESC, BEL, CR, BS, NUL...: ECMA-48 §5.2)
 *   and DEL, as `\x1b`;
 * - C1 controls U+0080-U+009F (CSI U+009B, OSC U+009D...: ECMA-48 §5.3), as `\x9b`;
 * - the explicit bidirectional formatting characters U+202A-U+202E and
 *   U+2066-U+2069 (Unicode UAX #9 §2.1-2.2), and the line and paragraph
 *   separators U+2028/U+2029, as `\u202e`.
 */
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function visible(character: string): string {
  const code = character.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/** `text` with every character listed above replaced by its visible escape; tabs and newlines stay. */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, visible);
}

/** `text` flattened to one line (whitespace runs become one space), made {@link terminalSafe} and cut to `limit` characters with `…`. */
export function oneLine(text: string, limit: number): string {
  const flat = terminalSafe(text.replace(/\s+/g, " ").trim());
  return flat.length > limit ? `${flat.slice(0, limit - 1)}…` : flat;
}

/**
 * A serialized JSON line with the same characters written as `\uXXXX`
 * escapes, which JSON.stringify leaves raw for all but C0: the line parses
 * to the same value and shows no control character on a terminal.
 */
export function terminalSafeJson(line: string): string {
  return line.replace(UNSAFE, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
