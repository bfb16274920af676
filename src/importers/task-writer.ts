import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { loadTaskFile } from "../config/load-task.js";
import { errorMessage } from "../errors.js";

/**
 * Linux's limit on one argument string (MAX_ARG_STRLEN, 32 pages of 4 KiB,
 * include/uapi/linux/binfmts.h): the sandbox runs `verify.command` as
 * `bash -c <command>`, so a longer command cannot start. Some room is left.
 */
export const MAX_VERIFY_COMMAND_BYTES = 128 * 1024 - 4096;

/** A line an importer prints per input task: converted to `directory`, or why not. */
export type ImportLine = { id: string; converted: true; directory: string; notes: string[] } | { id: string; converted: false; reason: string };

export function formatImportLine(line: ImportLine): string {
  return line.converted
    ? `${line.id}: converted -> ${line.directory}${line.notes.length ? ` (${line.notes.join("; ")})` : ""}`
    : `${line.id}: cannot convert: ${line.reason}`;
}

/** The task name task.yaml accepts (`[a-z0-9][a-z0-9-]*`) for a dataset's id, e.g. `astropy__astropy-12907` → `astropy--astropy-12907`. */
export function taskName(id: string): string {
  const name = id
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .replace(/^-+/, "");
  return name || "task";
}

/**
 * Shell lines that write `content` to `target` (a shell word, e.g. `"$d/test.patch"`) in the sandbox through a quoted
 * here-document (no expansion: the bytes arrive as they are), ending with a
 * newline as here-documents do. The delimiter is derived from the content's
 * hash and checked against its lines. Binary content goes through base64
 * (`base64 -d`, coreutils).
 */
export function hereDocument(target: string, content: Buffer): string {
  const text = content.toString("utf8");
  const binary = !Buffer.from(text, "utf8").equals(content) || text.includes("\0");
  const body = binary ? (content.toString("base64").match(/.{1,76}/g) ?? []).join("\n") : text.endsWith("\n") ? text.slice(0, -1) : text;
  const delimiter = `RUNNER_EOF_${createHash("sha256").update(content).digest("hex").slice(0, 16)}`;
  if (body.split("\n").includes(delimiter)) throw new Error(`content for ${target} holds its own here-document delimiter`);
  return `${binary ? "base64 -d" : "cat"} > ${target} <<'${delimiter}'\n${body}\n${delimiter}`;
}

/** The shipped worker policy, which imported tasks' policies start from. */
const WORKER_POLICY = new URL("../../policies/worker.yaml", import.meta.url);

/**
 * The policy of imported tasks: the shipped `worker` policy without the
 * `agent` tool. A worker subagent's work is verified with the task's verify
 * command, and its outcome (the command, with the hidden tests in it, and
 * the output tail) goes back to the main agent: a worker would hand the agent
 * the tests, and a way to run them as often as it likes.
 */
function benchmarkPolicy(): string {
  const policy = parse(readFileSync(WORKER_POLICY, "utf8")) as { name: string; description: string; tools: { allow: string[]; deny?: string[] } };
  policy.name = "benchmark-worker";
  policy.description = `${policy.description} Written by runner import: no subagents (a worker's verification would run the benchmark's hidden tests for the agent and show it their output).`;
  policy.tools.deny = [...(policy.tools.deny ?? []), "agent"];
  return `# Written by \`runner import\` from the shipped worker policy (docs/importers.md).
${stringify(policy, { lineWidth: 0 })}`;
}

/**
 * Writes `task.yaml` (block scalars for long text) and its `policy.yaml`
 * ({@link benchmarkPolicy}) into `directory` and loads
 * it as `runner batch run` will; returns the loader's message when the task
 * is not valid (e.g. an `--image` that is no image reference), else null.
 */
export function writeTaskFile(directory: string, task: Record<string, unknown>): string | null {
  mkdirSync(directory, { recursive: true });
  writeFileSync(join(directory, "policy.yaml"), benchmarkPolicy());
  const file = join(directory, "task.yaml");
  writeFileSync(file, stringify({ ...task, policy: "./policy.yaml" }, { lineWidth: 0, blockQuote: "literal" }));
  try {
    loadTaskFile(file);
    return null;
  } catch (error) {
    return errorMessage(error).replace(/\s*\n\s*/g, " ");
  }
}

/** A git pathspec glob matching exactly `path` (verify.protect entries are globs). */
export function literalPattern(path: string): string {
  return path.replace(/[\\*?[\]]/g, (character) => `\\${character}`);
}
