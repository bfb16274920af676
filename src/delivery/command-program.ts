import { ConfigError } from "../errors.js";
import { ShellParser } from "../policy/shell-syntax.js";
import type { Sandbox } from "../sandbox/sandbox.js";

/** Bash builtins that run no program and leave PATH, functions and aliases alone: a command starting with them is judged by the program after them. */
const INERT_BUILTINS = new Set([":", "true", "false", "echo", "printf", "set", "shopt", "umask", "ulimit", "unset", "pwd", "test", "["]);

/** Builtins that change the directory: a relative program path after them is looked up elsewhere. */
const DIRECTORY_BUILTINS = new Set(["cd", "pushd", "popd"]);

/** Builtins that set variables: inert unless they set PATH. */
const ASSIGNING_BUILTINS = new Set(["export", "declare", "typeset", "readonly", "local"]);

/**
 * Every other bash builtin and reserved word that can stand where a program
 * does (bash(1), "SHELL BUILTIN COMMANDS"): after one of them the program
 * that runs is not known from the text (it may run code, define functions or
 * aliases, or change PATH lookups), so no program is named.
 */
const OPAQUE_BUILTINS = new Set([
  ".",
  "alias",
  "bg",
  "bind",
  "break",
  "builtin",
  "caller",
  "command",
  "compgen",
  "complete",
  "compopt",
  "continue",
  "dirs",
  "disown",
  "enable",
  "eval",
  "exec",
  "exit",
  "fc",
  "fg",
  "getopts",
  "hash",
  "help",
  "history",
  "jobs",
  "kill",
  "let",
  "logout",
  "mapfile",
  "read",
  "readarray",
  "return",
  "shift",
  "source",
  "suspend",
  "time",
  "times",
  "trap",
  "type",
  "unalias",
  "wait",
]);

/**
 * The program a shell command runs first, as far as its text alone tells:
 * the command word of its first simple command, past leading builtins that
 * run nothing and change no lookup (`cd dir &&`, `set -e;`, `export X=1;`).
 * Null when it cannot be told: a syntax error, a command word that is a
 * variable or a substitution, a builtin that runs code or changes lookups
 * (`source`, `eval`, `alias`, `PATH=...`), a relative path after `cd`, or
 * no program at all.
 */
export async function firstProgram(command: string): Promise<string | null> {
  // However it is set (`PATH=... cmd`, `export PATH=...`, which the parser reads as a declaration), PATH changes the lookup.
  if (/\bPATH\+?=/.test(command)) return null;
  const script = (await ShellParser.load()).parse(command);
  if (script.errors.length > 0) return null;
  let changedDirectory = false;
  for (const simple of script.commands) {
    const [first, ...rest] = simple.words;
    if (!first) continue;
    if (first.kind !== "literal" || first.unquotedGlob) return null;
    const name = first.value;
    if (DIRECTORY_BUILTINS.has(name)) {
      changedDirectory = true;
      continue;
    }
    if (ASSIGNING_BUILTINS.has(name)) {
      if (rest.some((word) => word.kind !== "literal" || /^PATH$/.test(word.value))) return null;
      continue;
    }
    if (INERT_BUILTINS.has(name)) continue;
    if (OPAQUE_BUILTINS.has(name)) return null;
    if (name.includes("/") && !name.startsWith("/") && changedDirectory) return null;
    return name;
  }
  return null;
}

/** What the check prints when, and only when, the shell positively found no such program. */
const MISSING_MARKER = "agent-runner: no such program";

/**
 * Checks in `sandbox` (bash, at the workspace root, with the task's
 * environment) that the program {@link firstProgram} names for `command`
 * exists: a command bash finds (`command -v`: on PATH, a builtin or a
 * function) or an executable path. Returns the missing program's name, or
 * null when it exists or nothing could be told (no program named, the
 * check itself could not run: the verdict is left to the command itself).
 */
async function missingProgram(sandbox: Sandbox, command: string, signal: AbortSignal): Promise<string | null> {
  const program = await firstProgram(command);
  if (program === null) return null;
  try {
    const result = await sandbox.exec({
      command: `command -v ${shellQuote(program)} >/dev/null 2>&1 || echo '${MISSING_MARKER}'`,
      timeoutMs: 30_000,
      signal,
    });
    return result.exitCode === 0 && result.stdout.trim() === MISSING_MARKER ? program : null;
  } catch {
    // The sandbox failing here fails the run's next step as well, with its own message.
    return null;
  }
}

/**
 * Refuses a task whose `verify.command` names a program that is not in its
 * sandbox (after `sandbox.setup`), before the agent's first model call: the
 * run would be paid for and then blamed on the agent. ConfigError, reason
 * `task_invalid` (`runner exec` exits 2), naming the field and the fixes.
 */
export async function checkVerifyProgram(sandbox: Sandbox, verifyCommand: string, image: string, signal: AbortSignal): Promise<void> {
  const missing = await missingProgram(sandbox, verifyCommand, signal);
  if (missing === null) return;
  throw new ConfigError(
    `verify.command: its program "${missing}" is not in the task's sandbox (image ${image}, after sandbox.setup): bash's \`command -v ${missing}\` finds nothing. ` +
      `Fix the command in the task file (a typo?), or install the program in the image or with a sandbox.setup command. Nothing was sent to the model.`,
    { reason: "task_invalid" },
  );
}

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}
