import type { Argument, Command, Option } from "commander";
import { shellWord } from "../process/shell-word.js";

/** Shells `runner completion` writes a script for. */
export const COMPLETION_SHELLS = ["bash", "zsh", "fish"] as const;
export type CompletionShell = (typeof COMPLETION_SHELLS)[number];

/** What a value (an option's or a positional argument's) completes to. */
type ValueKind = { kind: "files" } | { kind: "directories" } | { kind: "run-ids" } | { kind: "words"; words: string[] } | { kind: "none" };

/** One command of the program, flattened: its path from the root (`[]` for the program itself). */
interface CommandShape {
  path: string[];
  description: string;
  subcommands: { name: string; description: string }[];
  options: { flags: string[]; description: string; value: ValueKind | null }[];
  /** Positional arguments in order. */
  arguments: ValueKind[];
}

/**
 * A shell completion script for `program` (commander has none built in):
 * subcommands, each command's options, option values and positional
 * arguments, taken from the commander definitions so they never drift.
 * Values complete by their placeholder name: `<dir>` to directories,
 * `<file>`/`[task]`/`<path>` to files, `<run-id>` to the run ids in
 * `$RUNNER_HOME/runs` (default `~/.runner/runs`), choices to the choices.
 *
 * Written here rather than with a library: the maintained completion
 * libraries for Node (@pnpm/tabtab, @bomb.sh/tab) answer each TAB by running
 * the CLI again (a node start, ~100 ms or more per key press); these scripts
 * are static shell code. zsh uses the bash script through zsh's own
 * `bashcompinit`, so its behaviour is the bash one (tested in
 * tests/e2e/cli-everyday.test.ts).
 */
export function completionScript(program: Command, shell: CompletionShell): string {
  const commands = flatten(program, []);
  const name = program.name();
  if (shell === "fish") return fishScript(name, commands);
  const bash = bashScript(name, commands);
  return shell === "bash" ? bash : `# zsh: load with  source <(${name} completion zsh)  after compinit\nautoload -U +X bashcompinit && bashcompinit\n${bash}`;
}

function flatten(command: Command, path: string[]): CommandShape[] {
  const visible = command.commands.filter((sub) => !(sub as unknown as { _hidden?: boolean })._hidden && sub.name() !== "help");
  const options = command.options
    .filter((option) => !option.hidden)
    .map((option) => ({
      flags: [option.short, option.long].filter((flag): flag is string => Boolean(flag)),
      description: option.description,
      value: optionValue(option),
    }));
  options.push({ flags: ["-h", "--help"], description: "display help for command", value: null });
  const shape: CommandShape = {
    path,
    description: command.description(),
    subcommands: visible.map((sub) => ({ name: sub.name(), description: sub.description() })),
    options,
    arguments: command.registeredArguments.map(argumentValue),
  };
  return [shape, ...visible.flatMap((sub) => flatten(sub, [...path, sub.name()]))];
}

function optionValue(option: Option): ValueKind | null {
  if (!option.required && !option.optional) return null;
  if (option.argChoices) return { kind: "words", words: option.argChoices };
  return kindOf(/[<[]([\w-]+)(?:\.\.\.)?[>\]]/.exec(option.flags)?.[1] ?? "");
}

function argumentValue(argument: Argument): ValueKind {
  if (argument.argChoices) return { kind: "words", words: argument.argChoices };
  return kindOf(argument.name());
}

function kindOf(placeholder: string): ValueKind {
  if (placeholder === "dir" || placeholder === "directory") return { kind: "directories" };
  if (placeholder === "file" || placeholder === "path" || placeholder === "task") return { kind: "files" };
  if (placeholder === "run-id") return { kind: "run-ids" };
  return { kind: "none" };
}

const key = (path: string[]) => `/${path.join("/")}`.replace(/^\/$/, "");

function bashValue(value: ValueKind): string {
  switch (value.kind) {
    case "files":
      return `compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$cur")`;
    case "directories":
      return `compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- "$cur")`;
    case "run-ids":
      return `mapfile -t COMPREPLY < <(compgen -W "$(command ls -1 "\${RUNNER_HOME:-$HOME/.runner}/runs" 2>/dev/null)" -- "$cur")`;
    case "words":
      return `mapfile -t COMPREPLY < <(compgen -W ${shellWord(value.words.join(" "))} -- "$cur")`;
    case "none":
      return "COMPREPLY=()";
  }
}

function bashScript(name: string, commands: CommandShape[]): string {
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, "_")}`;
  const commandPaths = commands.filter((command) => command.path.length).map((command) => `"${key(command.path)}"`);
  const valueOptions = commands.flatMap((command) =>
    command.options.filter((option) => option.value).flatMap((option) => option.flags.map((flag) => `"${key(command.path)} ${flag}"`)),
  );
  const lines = [
    `# ${name} completion for bash (generated by \`${name} completion bash\`); load it with  source <(${name} completion bash)`,
    `${fn}() {`,
    `  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"`,
    // The command path so far, and how many positional arguments of that command precede the cursor.
    `  local path="" positional=0 value=0 i word`,
    `  for ((i = 1; i < COMP_CWORD; i++)); do`,
    `    word="\${COMP_WORDS[i]}"`,
    `    if ((value)); then value=0; continue; fi`,
    `    case "$word" in`,
    `      -*=*) continue ;;`,
    `      -*) case "$path $word" in ${valueOptions.join("|") || '""'}) value=1 ;; esac; continue ;;`,
    `    esac`,
    `    case "$path/$word" in`,
    `      ${commandPaths.join("|")}) path="$path/$word"; positional=0 ;;`,
    `      *) positional=$((positional + 1)) ;;`,
    `    esac`,
    `  done`,
    `  if ((value)); then`,
    `    case "$path $prev" in`,
    ...commands.flatMap((command) =>
      command.options
        .filter((option) => option.value)
        .map((option) => `      ${option.flags.map((flag) => `"${key(command.path)} ${flag}"`).join("|")}) ${bashValue(option.value!)} ;;`),
    ),
    `    esac`,
    `    return 0`,
    `  fi`,
    `  if [[ "$cur" == -* ]]; then`,
    `    case "$path" in`,
    ...commands.map(
      (command) =>
        `      "${key(command.path)}") mapfile -t COMPREPLY < <(compgen -W ${shellWord(command.options.flatMap((option) => option.flags).join(" "))} -- "$cur") ;;`,
    ),
    `    esac`,
    `    return 0`,
    `  fi`,
    `  case "$path $positional" in`,
    ...commands.flatMap((command) => [
      ...(command.subcommands.length
        ? [`    "${key(command.path)} 0") mapfile -t COMPREPLY < <(compgen -W ${shellWord(command.subcommands.map((sub) => sub.name).join(" "))} -- "$cur") ;;`]
        : []),
      ...(command.subcommands.length ? [] : command.arguments.map((argument, index) => `    "${key(command.path)} ${index}") ${bashValue(argument)} ;;`)),
    ]),
    `    *) COMPREPLY=() ;;`,
    `  esac`,
    `  return 0`,
    `}`,
    `complete -F ${fn} ${name}`,
  ];
  return `${lines.join("\n")}\n`;
}

function fishValue(value: ValueKind): string {
  switch (value.kind) {
    case "files":
      return "-r -F";
    case "directories":
      return "-r -f -a '(__fish_complete_directories)'";
    case "run-ids":
      return `-r -f -a '(command ls -1 (set -q RUNNER_HOME; and echo $RUNNER_HOME; or echo $HOME/.runner)/runs 2>/dev/null)'`;
    case "words":
      return `-r -f -a ${shellWord(value.words.join(" "))}`;
    case "none":
      return "-r -f";
  }
}

function fishScript(name: string, commands: CommandShape[]): string {
  const seen = (path: string[]) => path.map((part) => `__fish_seen_subcommand_from ${part}`).join("; and ");
  const childrenOf = (path: string[]) => commands.find((command) => key(command.path) === key(path))?.subcommands.map((sub) => sub.name) ?? [];
  /** True exactly at `path`: its words seen, none of its subcommands yet. */
  const at = (path: string[]) => {
    const children = childrenOf(path);
    const base = path.length ? seen(path) : "__fish_use_subcommand";
    return children.length && path.length ? `${base}; and not __fish_seen_subcommand_from ${children.join(" ")}` : base;
  };
  const lines = [
    `# ${name} completion for fish (generated by \`${name} completion fish\`); load it with  ${name} completion fish | source`,
    `complete -c ${name} -f`,
  ];
  for (const command of commands) {
    const condition = shellWord(at(command.path));
    for (const sub of command.subcommands) lines.push(`complete -c ${name} -n ${condition} -a ${sub.name} -d ${shellWord(sub.description)}`);
    for (const option of command.options) {
      const flags = option.flags.map((flag) => (flag.startsWith("--") ? `-l ${flag.slice(2)}` : `-s ${flag.slice(1)}`)).join(" ");
      lines.push(`complete -c ${name} -n ${condition} ${flags} ${option.value ? `${fishValue(option.value)} ` : ""}-d ${shellWord(option.description)}`);
    }
    if (!command.subcommands.length && command.arguments[0] && command.arguments[0].kind !== "none") {
      lines.push(`complete -c ${name} -n ${condition} ${fishValue(command.arguments[0]).replace(/^-r /, "")}`);
    }
  }
  return `${lines.join("\n")}\n`;
}
