import { oneLine, terminalSafe } from "../terminal-text.js";

/** Lines of a multi-line command shown under its call's line; the rest is counted. */
const SHOWN_COMMAND_LINES = 6;

/**
 * A tool call's arguments as a person reads them, from the JSON text of
 * `tool_call.started`: the command of `run_shell` (its first line, with the
 * number of lines after it), the path of a file tool, else `key=value` pairs
 * of the scalar arguments. `rest` holds the further lines of a multi-line
 * command (at most {@link SHOWN_COMMAND_LINES}, then a count), to be shown
 * under the call's line. Every string is made terminal-safe; arguments that
 * are not a JSON object (cut at 4000 characters, or malformed) are shown as
 * their text on one line.
 */
export function describeArguments(name: string, argumentsText: string): { head: string; rest: string[] } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(argumentsText);
  } catch {
    return { head: oneLine(argumentsText, 140), rest: [] };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return { head: oneLine(argumentsText, 140), rest: [] };
  const input = parsed as Record<string, unknown>;
  if (typeof input.command === "string") {
    const lines = input.command.replace(/\n+$/, "").split("\n");
    const shown = lines.slice(1, 1 + SHOWN_COMMAND_LINES).map((line) => terminalSafe(line.length > 160 ? `${line.slice(0, 159)}…` : line));
    const hidden = lines.length - 1 - shown.length;
    return {
      head: `${oneLine(lines[0]!, 140)}${input.background === true ? " (background)" : ""}`,
      rest: hidden > 0 ? [...shown, `… ${hidden} more line${hidden === 1 ? "" : "s"}`] : shown,
    };
  }
  if (typeof input.path === "string" && name !== "grep" && name !== "glob") return { head: oneLine(input.path, 140), rest: [] };
  const pairs = Object.entries(input)
    .filter(([, value]) => ["string", "number", "boolean"].includes(typeof value))
    .map(([key, value]) => `${key}=${typeof value === "string" ? JSON.stringify(value) : String(value)}`);
  return { head: oneLine(pairs.join(" "), 140), rest: [] };
}

/** What `tool_call.finished` says, as docs/events.md gives it. */
export interface FinishedCall {
  name: string;
  is_error: boolean;
  duration_ms: number;
  result_preview: string;
  details?: Record<string, unknown>;
}

/**
 * A finished call's outcome in a few words, from its `details` (each tool's
 * own facts) and the start of its result: `exit 0 · <first line of output>`
 * for `run_shell`, lines and bytes for file tools, counts for listings, the
 * error's first line for a failed or refused call. `failed` says whether to
 * show it as a failure (a non-zero exit, an error).
 */
export function describeOutcome(call: FinishedCall): { text: string; failed: boolean } {
  const details = call.details ?? {};
  const number = (key: string) => (typeof details[key] === "number" ? (details[key] as number) : undefined);
  if (call.name === "run_shell" && typeof details.task_id === "string") return { text: `background task ${details.task_id}`, failed: false };
  if (call.name === "run_shell" && "exit_code" in details) {
    const exit = details.timed_out === true ? "timed out" : details.exit_code === null ? "killed" : `exit ${String(details.exit_code)}`;
    const first = firstOutputLine(call.result_preview);
    return { text: `${exit}${first ? ` · ${oneLine(first, 100)}` : ""}`, failed: details.exit_code !== 0 || details.timed_out === true };
  }
  if (call.is_error) return { text: oneLine(call.result_preview.replace(/^Error: /, "").split("\n")[0] ?? "", 160), failed: true };
  const lines = number("lines");
  const bytes = number("bytes") ?? number("size");
  const facts = [
    lines === undefined ? "" : `${lines} line${lines === 1 ? "" : "s"}`,
    bytes === undefined ? "" : formatBytes(bytes),
    number("replacements") === undefined ? "" : `${number("replacements")} replaced`,
    number("entries") === undefined ? "" : `${number("entries")} entries`,
    number("matches") === undefined ? "" : `${number("matches")} matches`,
    number("rows") === undefined ? "" : `${number("rows")} rows`,
  ].filter(Boolean);
  if (facts.length) return { text: facts.join(", "), failed: false };
  const first = call.result_preview.split("\n").find((line) => line.trim());
  return { text: first ? oneLine(first, 100) : "ok", failed: false };
}

/**
 * The first line of a `run_shell` result worth showing: stdout's first
 * non-empty line, else stderr's; null when both are empty. The result's
 * layout is run_shell's (`exit_code: …`, `stdout:`, …, `stderr:`, …).
 */
function firstOutputLine(result: string): string | null {
  const stdout = /\nstdout:\n([\s\S]*?)(?:\nstderr:\n([\s\S]*))?$/.exec(result);
  if (!stdout) return null;
  for (const section of [stdout[1], stdout[2]]) {
    const line = section?.split("\n").find((text) => text.trim() && text !== "(empty)");
    if (line) return line;
  }
  return null;
}

/** `812 B`, `4.2 KiB`, `3.1 MiB`. */
function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
}
