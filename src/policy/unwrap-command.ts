import { commandBaseName } from "./command-pattern.js";
import type { ShellWord } from "./shell-syntax.js";

/** One way of reading a command: the wrapper itself (`sudo rm x`) or what it runs (`rm x`). */
export interface CommandLayer {
  words: ShellWord[];
  /**
   * True for wrappers and carriers (`env`, `sudo`, `nohup`, `xargs`,
   * `sh -c`, `eval`): only rules that name them apply, not the default risk;
   * what they run is judged on its own.
   */
  wrapper: boolean;
}

/** Shell code a command runs: `sh -c CODE`, `eval CODE`, `trap CODE`, a here-document fed to a shell. */
export interface EmbeddedScript {
  word: ShellWord;
  /** Where it came from, for messages: `sh -c`, `eval`, `here-document`. */
  origin: string;
}

/** A simple command seen through its wrappers. */
export interface UnwrappedCommand {
  /** Outermost first; the last is the program that finally runs. */
  layers: CommandLayer[];
  /** Further commands it starts with their own argument lists (`find -exec CMD ;`). */
  nested: ShellWord[][];
  /** Shell code it runs. */
  scripts: EmbeddedScript[];
  /** A shell with neither `-c` nor a script file: it runs whatever arrives on its standard input. */
  readsScriptFromStdin: boolean;
}

interface WrapperSpec {
  /** Options that take the next word as their value (or `--opt=value`, `-oVALUE`). */
  valueOptions?: string[];
  /** Options whose value is shell code (`su -c CODE`, `flock -c CODE`). */
  codeOptions?: string[];
  /** Options whose value is a command line split into words (`env -S "rm -rf /"`). */
  splitOptions?: string[];
  /** Options that make it not run a command at all (`command -v rm`). */
  lookupOptions?: string[];
  /** Plain words before the command (`timeout 5 cmd`: the duration). */
  positional?: number;
  /** `NAME=value` words before the command are environment settings. */
  assignments?: boolean;
}

/** Programs that run another program given as their remaining arguments. */
const WRAPPERS: Record<string, WrapperSpec> = {
  env: { valueOptions: ["-u", "--unset", "-C", "--chdir"], splitOptions: ["-S", "--split-string"], assignments: true },
  sudo: {
    valueOptions: [
      "-u",
      "--user",
      "-g",
      "--group",
      "-h",
      "--host",
      "-p",
      "--prompt",
      "-r",
      "--role",
      "-t",
      "--type",
      "-C",
      "--close-from",
      "-D",
      "--chdir",
      "-T",
      "--command-timeout",
      "-U",
      "--other-user",
    ],
    assignments: true,
  },
  doas: { valueOptions: ["-u", "-C"] },
  command: { lookupOptions: ["-v", "-V"] },
  builtin: {},
  exec: { valueOptions: ["-a"] },
  nice: { valueOptions: ["-n", "--adjustment"] },
  nohup: {},
  setsid: {},
  coproc: {},
  unbuffer: {},
  busybox: {},
  time: { valueOptions: ["-f", "--format", "-o", "--output"] },
  timeout: { valueOptions: ["-s", "--signal", "-k", "--kill-after"], positional: 1 },
  stdbuf: { valueOptions: ["-i", "-o", "-e", "--input", "--output", "--error"] },
  ionice: { valueOptions: ["-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"] },
  taskset: { positional: 1 },
  chroot: { valueOptions: ["--userspec", "--groups"], positional: 1 },
  strace: { valueOptions: ["-o", "-e", "-p", "-s", "-u", "-a", "-b", "-E", "-I", "-O", "-P", "-S", "-X"] },
  flock: { valueOptions: ["-w", "--timeout", "-E", "--conflict-exit-code"], codeOptions: ["-c", "--command"], positional: 1 },
  su: { valueOptions: ["-s", "--shell", "-g", "--group", "-G", "--supp-group"], codeOptions: ["-c", "--command"], positional: 1 },
  runuser: { valueOptions: ["-u", "--user", "-s", "--shell", "-g", "--group", "-G", "--supp-group"], codeOptions: ["-c", "--command"] },
};

/** Variables whose value is a command line that programs run (`GIT_PAGER='rm -rf /' git log`). */
export const CODE_VARIABLES = new Set([
  "GIT_PAGER",
  "PAGER",
  "MANPAGER",
  "GIT_EDITOR",
  "GIT_SEQUENCE_EDITOR",
  "EDITOR",
  "VISUAL",
  "GIT_SSH_COMMAND",
  "GIT_EXTERNAL_DIFF",
  "GIT_ASKPASS",
  "SSH_ASKPASS",
  "BASH_ENV",
  "ENV",
  "PROMPT_COMMAND",
]);

const SHELLS = new Set(["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash", "posh", "fish"]);
const XARGS_VALUE_OPTIONS = [
  "-a",
  "--arg-file",
  "-d",
  "--delimiter",
  "-E",
  "-I",
  "-L",
  "-n",
  "--max-args",
  "-P",
  "--max-procs",
  "-s",
  "--max-chars",
  "--process-slot-var",
];
const FIND_EXEC = new Set(["-exec", "-execdir", "-ok", "-okdir"]);
const MAX_LAYERS = 16;

const unknownArguments = (text: string): ShellWord => ({ kind: "dynamic", text });

/**
 * Sees through wrappers so that `sudo env -i X=1 nice rm -rf /` is judged as
 * `rm -rf /` (and as each wrapper, for rules that name one), collects the
 * shell code it runs (`sh -c`, `eval`, `trap`, `su -c`, `env -S`) and the
 * commands `find -exec` starts, and notes a shell reading its script from
 * standard input. `xargs CMD` is `CMD` plus unknown arguments.
 */
export function unwrapCommand(words: ShellWord[]): UnwrappedCommand {
  const result: UnwrappedCommand = { layers: [], nested: [], scripts: [], readsScriptFromStdin: false };
  let current = words;
  for (let depth = 0; depth < MAX_LAYERS && current.length > 0; depth += 1) {
    const first = current[0]!;
    if (first.kind === "dynamic" || first.unquotedGlob) {
      result.layers.push({ words: current, wrapper: false });
      return result;
    }
    const name = commandBaseName(first.value);
    const spec = WRAPPERS[name];
    if (spec) {
      const inner = peelWrapper(current, spec, result);
      result.layers.push({ words: current, wrapper: inner !== null || result.scripts.length > 0 });
      if (!inner) return result;
      current = inner;
      continue;
    }
    if (name === "xargs") {
      result.layers.push({ words: current, wrapper: true });
      current = peelXargs(current);
      continue;
    }
    if (SHELLS.has(name)) {
      result.layers.push({ words: current, wrapper: readShellArguments(current, result) });
      return result;
    }
    if (name === "eval") {
      const code = joinWords(current.slice(1), current);
      if (code) result.scripts.push({ word: code, origin: "eval" });
      result.layers.push({ words: current, wrapper: true });
      return result;
    }
    const handler = current[1];
    if (name === "trap" && current.length >= 3 && handler && !(handler.kind === "literal" && handler.value.startsWith("-"))) {
      result.scripts.push({ word: handler, origin: "trap" });
    }
    if (name === "watch") {
      const code = joinWords(current.slice(skipOptions(current, 1, ["-n", "--interval", "-d", "--differences"])), current);
      if (code) result.scripts.push({ word: code, origin: "watch" });
      result.layers.push({ words: current, wrapper: true });
      return result;
    }
    if (name === "find") result.nested.push(...findExecCommands(current));
    result.layers.push({ words: current, wrapper: false });
    return result;
  }
  if (current.length > 0) result.layers.push({ words: current, wrapper: false });
  return result;
}

/** Index of the first word after the options (value options consume their value). */
function skipOptions(words: ShellWord[], start: number, valueOptions: string[]): number {
  let index = start;
  while (index < words.length) {
    const word = words[index]!;
    if (word.kind !== "literal" || !word.value.startsWith("-") || word.value === "-") break;
    if (word.value === "--") return index + 1;
    index += valueOptions.includes(word.value) ? 2 : 1;
  }
  return index;
}

/** Returns the wrapped command's words, or null when the wrapper runs no further program. */
function peelWrapper(words: ShellWord[], spec: WrapperSpec, result: UnwrappedCommand): ShellWord[] | null {
  let positional = spec.positional ?? 0;
  let index = 1;
  while (index < words.length) {
    const word = words[index]!;
    if (word.kind === "dynamic") break;
    const value = word.value;
    if (value === "--") {
      index += 1;
      break;
    }
    if (value.startsWith("-") && value.length > 1) {
      const [option, attached] = splitOption(value, spec);
      if (spec.lookupOptions?.includes(option)) return null;
      const takesValue = (list?: string[]) => list?.includes(option) ?? false;
      if (takesValue(spec.codeOptions) || takesValue(spec.splitOptions)) {
        const code = attached !== null ? literal(attached) : words[index + 1];
        if (code) result.scripts.push({ word: code, origin: `${option} of ${commandBaseName(literalValue(words[0]!))}` });
        index += attached !== null ? 1 : 2;
        continue;
      }
      index += takesValue(spec.valueOptions) && attached === null ? 2 : 1;
      continue;
    }
    if (spec.assignments && /^[A-Za-z_][A-Za-z0-9_]*=/.test(value)) {
      const name = value.slice(0, value.indexOf("="));
      if (CODE_VARIABLES.has(name)) result.scripts.push({ word: literal(value.slice(name.length + 1)), origin: name });
      index += 1;
      continue;
    }
    if (positional > 0) {
      positional -= 1;
      index += 1;
      continue;
    }
    break;
  }
  while (positional > 0 && index < words.length) {
    positional -= 1;
    index += 1;
  }
  const inner = words.slice(index);
  return inner.length > 0 ? inner : null;
}

/** Splits `--opt=value` and `-oVALUE` (when `-o` takes a value) into the option and its attached value. */
function splitOption(value: string, spec: WrapperSpec): [string, string | null] {
  if (value.startsWith("--")) {
    const equals = value.indexOf("=");
    return equals === -1 ? [value, null] : [value.slice(0, equals), value.slice(equals + 1)];
  }
  const short = value.slice(0, 2);
  const withValues = [...(spec.valueOptions ?? []), ...(spec.codeOptions ?? []), ...(spec.splitOptions ?? [])];
  if (value.length > 2 && withValues.includes(short)) return [short, value.slice(2)];
  return [value, null];
}

function peelXargs(words: ShellWord[]): ShellWord[] {
  let replace: string | null = null;
  let index = 1;
  while (index < words.length) {
    const word = words[index]!;
    if (word.kind !== "literal" || !word.value.startsWith("-") || word.value === "-") break;
    if (word.value === "--") {
      index += 1;
      break;
    }
    if (word.value === "-I") replace = literalValue(words[index + 1] ?? literal(""));
    else if (word.value.startsWith("-I")) replace = word.value.slice(2);
    else if (word.value === "-i" || word.value === "--replace") replace = "{}";
    else if (word.value.startsWith("--replace=")) replace = word.value.slice("--replace=".length);
    else if (/^-i./.test(word.value)) replace = word.value.slice(2);
    index += XARGS_VALUE_OPTIONS.includes(word.value) ? 2 : 1;
  }
  const inner = words.slice(index);
  const command = inner.length > 0 ? inner : [literal("echo")];
  if (replace) {
    const marker = replace;
    return command.map((word) => (word.kind === "literal" && word.value.includes(marker) ? unknownArguments(`(${word.value}: input of xargs)`) : word));
  }
  return [...command, unknownArguments("(arguments read by xargs from its input)")];
}

/**
 * Reads a shell's arguments: `-c CODE` becomes an embedded script, no script
 * at all means it reads one from standard input. Returns whether the shell is
 * only a carrier of code we judge (then the default risk does not apply to it).
 */
function readShellArguments(words: ShellWord[], result: UnwrappedCommand): boolean {
  let command = false;
  let index = 1;
  while (index < words.length) {
    const word = words[index]!;
    if (word.kind === "dynamic") {
      // Options we cannot see may include -c: whatever follows may be code.
      result.scripts.push({ word, origin: `${literalValue(words[0]!)} with unknown options` });
      return true;
    }
    const value = word.value;
    if (value === "--" || value === "-") {
      index += 1;
      break;
    }
    if (!/^[-+]/.test(value) || value.length === 1) break;
    if (["-o", "+o", "-O", "+O", "--rcfile", "--init-file"].includes(value)) {
      index += 2;
      continue;
    }
    if (!value.startsWith("--") && value.startsWith("-") && value.includes("c")) command = true;
    index += 1;
  }
  if (command) {
    const code = words[index];
    if (code) result.scripts.push({ word: code, origin: `${commandBaseName(literalValue(words[0]!))} -c` });
    return true;
  }
  if (index >= words.length) result.readsScriptFromStdin = true;
  return false;
}

/** The commands of `find ... -exec CMD {} ;` (and -execdir, -ok, -okdir); `{}` stands for the paths find finds. */
function findExecCommands(words: ShellWord[]): ShellWord[][] {
  const commands: ShellWord[][] = [];
  for (let index = 1; index < words.length; index += 1) {
    const word = words[index]!;
    if (word.kind !== "literal" || !FIND_EXEC.has(word.value)) continue;
    const command: ShellWord[] = [];
    index += 1;
    for (; index < words.length; index += 1) {
      const part = words[index]!;
      if (part.kind === "literal" && (part.value === ";" || part.value === "+")) break;
      command.push(
        part.kind === "literal" && part.value.includes("{}") ? { kind: "dynamic", text: `(${part.value}: a path found by find)`, operand: true } : part,
      );
    }
    if (command.length > 0) commands.push(command);
  }
  return commands;
}

/** `eval a b` runs "a b": the words joined by spaces, unknown when any word is. */
function joinWords(words: ShellWord[], whole: ShellWord[]): ShellWord | null {
  if (words.length === 0) return null;
  if (words.some((word) => word.kind === "dynamic")) return { kind: "dynamic", text: whole.map(wordText).join(" ") };
  return literal(words.map(literalValue).join(" "));
}

function literal(value: string): ShellWord {
  return { kind: "literal", value, unquotedGlob: false };
}

function literalValue(word: ShellWord): string {
  return word.kind === "literal" ? word.value : word.text;
}

function wordText(word: ShellWord): string {
  return word.kind === "literal" ? word.value : word.text;
}
