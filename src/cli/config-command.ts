import { resolve } from "node:path";
import { loadDefaults } from "../config/defaults-file.js";
import { taskSchema } from "../config/task-schema.js";
import { terminalSafe } from "../terminal-text.js";

/**
 * `runner config show [-C DIR]`: the defaults a run on the repository in
 * `workspace` (default: the current directory) starts from, one key a line
 * with its value and where it came from (`file:line`, or `built-in`), then
 * the notes of defaults files left unread. Throws DefaultsFileError (exit 2)
 * for a bad defaults file.
 */
export function configShowCommand(home: string, options: { workspace?: string }, write: (text: string) => void = (text) => process.stdout.write(text)): number {
  const defaults = loadDefaults({ home, cwd: process.cwd(), workspace: resolve(options.workspace ?? ".") });
  const builtIn = taskSchema.parse({ name: "defaults", instruction: "-" });
  const rows: [string, unknown][] = [
    ["model.provider", builtIn.model.provider],
    ["model.name", process.env.OPENAI_MODEL ? `${process.env.OPENAI_MODEL} (OPENAI_MODEL)` : "(none: OPENAI_MODEL)"],
    ...Object.keys(defaults.values.model ?? {})
      .filter((key) => key !== "provider" && key !== "name")
      .map((key): [string, unknown] => [`model.${key}`, undefined]),
    ["policy", builtIn.policy],
    ["max_steps", builtIn.max_steps],
    ["timeout", "(none)"],
    ["image", builtIn.sandbox.image],
    ...Object.entries(builtIn.sandbox.limits).map(([key, value]): [string, unknown] => [`limits.${key}`, value]),
  ];
  const lines = rows.map(([key, builtInValue]) => {
    const [group, field] = key.split(".") as [keyof typeof defaults.values, string | undefined];
    const set = field === undefined ? defaults.values[group] : (defaults.values[group] as Record<string, unknown> | undefined)?.[field];
    const source = defaults.sources.get(key);
    return [key, String(set ?? builtInValue), set === undefined ? "built-in" : (source ?? "defaults")];
  });
  const widths = [0, 1].map((column) => Math.max(...lines.map((line) => line[column]!.length)));
  const out = [
    `defaults files (lowest first; task.yaml and flags go over them): ${defaults.files.length ? defaults.files.join(", ") : "none read"}`,
    ...defaults.notes.map((note) => `note: ${note}`),
    "",
    ...lines.map(([key, value, source]) => `${key!.padEnd(widths[0]!)}  ${value!.padEnd(widths[1]!)}  ${source}`),
  ];
  write(`${terminalSafe(out.join("\n"))}\n`);
  return 0;
}
