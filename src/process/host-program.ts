import { accessSync, constants, existsSync, lstatSync, readlinkSync, statSync } from "node:fs";
import { basename, delimiter, dirname, isAbsolute, join, resolve, sep } from "node:path";
import { isPathInside } from "./path-inside.js";

/**
 * A program the runner starts on the host for the user: a tool hook or a
 * trusted MCP server. It runs as argv, never through a shell.
 */
export interface HostProgram {
  /** Where the task names it, e.g. `hooks.pre_tool_use.0` or `mcp_servers.docs`. */
  field: string;
  /** An executable: a path (relative to `cwd`) or a name looked up on `searchPath`. */
  command: string;
  args: readonly string[];
  /** Values of the variables the task sets for it (`mcp_servers.<name>.env`), checked like arguments. */
  environmentValues?: readonly string[];
}

/** Where a {@link HostProgram} would run, and what it must not reach. */
export interface HostProgramPlace {
  /** Its working directory (absolute). */
  cwd: string;
  /** The PATH a bare command name is looked up on (relative entries against `cwd`). */
  searchPath: string | undefined;
  /**
   * The trees the agent's work can write, as real paths: the task's
   * repository (a merge brings the agent's files into it) and RUNNER_HOME's
   * `runs/` (the agents' worktrees).
   */
  agentTrees: readonly string[];
}

/** One refusal: the field (`hooks.pre_tool_use.0.args.1`) and what to do. */
export interface HostProgramProblem {
  path: string;
  message: string;
}

/** The executable to start (a real path, no link left to follow) or why the program is refused. */
export type HostProgramCheck = { executable: string; problems: [] } | { executable: null; problems: HostProgramProblem[] };

/**
 * Shells and interpreters: programs that run code given in their arguments
 * (`-c`, `-e`, `-m`...) or read from stdin (which carries the agent's tool
 * call). They are accepted only as `<interpreter> <script file> [args...]`
 * (Python also `-m <module>`), so that the code they run is a file the
 * runner checked. Matched by the command's name and by its real file's name
 * (`/bin/sh` is `dash`). A copy of an interpreter under another name is not
 * recognised: that is the task author's to avoid (docs/policies.md "Hooks").
 */
const INTERPRETER =
  /^(?:sh|bash|dash|zsh|ksh|ksh93|mksh|ash|yash|fish|csh|tcsh|busybox|python[0-9.]*|pypy[0-9.]*|node|nodejs|deno|bun|perl[0-9.]*|ruby[0-9.]*|php[0-9.]*|lua[0-9.]*|luajit|tclsh[0-9.]*|wish[0-9.]*|expect|Rscript|pwsh|osascript|awk|gawk|mawk|nawk|sed)$/;
const PYTHON = /^(?:python[0-9.]*|pypy[0-9.]*)$/;
/** Programs whose job is to start the program their arguments name (coreutils, util-linux, sudo and kin). */
const LAUNCHER =
  /^(?:env|xargs|sudo|doas|su|runuser|setpriv|nice|ionice|nohup|setsid|timeout|stdbuf|time|flock|chroot|unshare|nsenter|bwrap|firejail|script|watch|taskset|chrt|prlimit|systemd-run|sg|parallel|strace|ltrace|gdb|valgrind|fakeroot|faketime|eatmydata|unbuffer|tini|dumb-init|gosu|su-exec)$/;
/** What a shell would have interpreted in `command`: whitespace, operators, quotes, expansions. */
const SHELL_TEXT = /[\s;&|<>()$`'"\\*?[\]{}~!#]/;

/**
 * Decides whether a user's host program may run, from what the task names
 * (no shell text is judged: there is no shell). Refused, each with its own
 * problem:
 * - a working directory inside an agent tree;
 * - a `command` that is shell text (`cd repo && ./x.sh`), that is not found,
 *   or whose file, or any symlink on the way to it, lies inside an agent tree;
 * - an argument or variable value that names a path inside an agent tree
 *   (the whole value, the part after the first `=`, each `:`-separated part;
 *   relative ones against `cwd`; every symlink on the way counts);
 * - a shell or interpreter given anything but a script file first (inline
 *   code, options, or nothing: it would read the agent's tool call from
 *   stdin as its program), and a launcher (`env`, `sudo`, `xargs`...).
 *
 * What the program does once it runs is not checked: a script the user
 * wrote can still reach the repository (README "Trust").
 */
export function checkHostProgram(program: HostProgram, place: HostProgramPlace): HostProgramCheck {
  const problems: HostProgramProblem[] = [];
  const insideAgentTree = (path: string) => place.agentTrees.find((tree) => isPathInside(path, tree)) ?? null;
  const reached = (value: string): { path: string; tree: string } | null => {
    for (const path of pathsOnTheWay(place.cwd, value)) {
      const tree = insideAgentTree(path);
      if (tree) return { path, tree };
    }
    return null;
  };
  const cwdTree = reached(place.cwd);
  if (cwdTree) {
    problems.push({
      path: program.field,
      message: `it would run on the host in ${place.cwd}, inside ${cwdTree.tree}, which the agent's work can change; keep the task file (its directory is the working directory) outside it`,
    });
  }

  let executable: string | null = null;
  const found = findExecutable(program.command, place);
  if (found === null) {
    problems.push({
      path: `${program.field}.command`,
      message: SHELL_TEXT.test(program.command)
        ? `\`${program.command}\` is shell text, and host programs run without a shell; set \`command\` to one executable (a path, or a name on PATH) and \`args\` to its arguments, and put anything longer (cd, &&, pipes) in a script outside the repository`
        : `${program.command} is not an executable file${program.command.includes("/") ? ` (relative paths are from ${place.cwd})` : " on PATH"}`,
    });
  } else {
    const commandTree = reached(found);
    if (commandTree) {
      problems.push({
        path: `${program.field}.command`,
        message: `${program.command} resolves to ${commandTree.path}, inside ${commandTree.tree}, which the agent's work can change; keep the program outside it`,
      });
    } else {
      executable = resolveLinks(found);
    }
  }

  const names = [basename(program.command), executable ? basename(executable) : null].filter((name) => name !== null);
  if (names.some((name) => LAUNCHER.test(name))) {
    problems.push({
      path: `${program.field}.command`,
      message: `${program.command} starts the program its arguments name, which the runner does not check; give that program itself as \`command\`, or write a script outside the repository`,
    });
  } else if (names.some((name) => INTERPRETER.test(name))) {
    const first = program.args[0];
    const isModule = names.some((name) => PYTHON.test(name)) && first === "-m" && program.args[1] !== undefined;
    if (isModule) {
      // `-m a.b` imports `a` from the working directory first.
      const moduleTree = reached(program.args[1]!.split(".")[0]!);
      if (moduleTree) {
        problems.push({
          path: `${program.field}.args.1`,
          message: `module ${program.args[1]} would be imported from ${moduleTree.path}, inside ${moduleTree.tree}, which the agent's work can change`,
        });
      }
    } else if (first === undefined || first.startsWith("-") || !isFile(resolve(place.cwd, first))) {
      problems.push({
        path: `${program.field}.args`,
        message: `${program.command} runs code from its arguments or stdin, which the runner cannot check (stdin carries the agent's tool call); give a script file as the first argument (\`args: [/path/to/check.py, ...]\`, options after it) or make the script executable and name it as \`command\``,
      });
    }
  }

  const values = [
    ...program.args.map((value, index) => ({ value, path: `${program.field}.args.${index}` })),
    ...(program.environmentValues ?? []).map((value) => ({ value, path: `${program.field}.env` })),
  ];
  for (const { value, path } of values) {
    for (const part of valueParts(value)) {
      const tree = reached(part);
      if (tree) {
        problems.push({
          path,
          message: `\`${value}\` names ${tree.path}, inside ${tree.tree}, which the agent's work can change; keep what a host program reads outside it`,
        });
        break;
      }
    }
  }
  return problems.length === 0 && executable !== null ? { executable, problems: [] } : { executable: null, problems };
}

/** The candidate paths in one argument: itself, what follows its first `=`, and each `:`-separated part of both. */
function valueParts(value: string): string[] {
  const equals = value.indexOf("=");
  const wholes = equals >= 0 ? [value, value.slice(equals + 1)] : [value];
  return [...new Set(wholes.flatMap((whole) => [whole, ...whole.split(":")]))].filter((part) => part.length > 0);
}

/** `command` as spawn would find it: a path against `cwd`, or the first executable file of that name on PATH. */
function findExecutable(command: string, place: HostProgramPlace): string | null {
  if (command.includes("/")) {
    const path = resolve(place.cwd, command);
    return isExecutableFile(path) ? path : null;
  }
  for (const entry of (place.searchPath ?? "").split(delimiter)) {
    // An empty PATH entry is the working directory, as execvp reads it.
    const path = resolve(place.cwd, entry, command);
    if (isExecutableFile(path)) return path;
  }
  return null;
}

function isExecutableFile(path: string): boolean {
  if (!isFile(path)) return false;
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Most links followed on the way to one path, as the kernel's limit (40, path_resolution(7)). */
const MAX_LINKS = 40;

/**
 * Every path the kernel passes through when it opens `value` from `cwd`:
 * the final path and each symlink on the way (a link inside an agent tree
 * can be re-pointed by the agent even when today's target lies outside).
 * Components that do not exist are taken as written.
 */
function pathsOnTheWay(cwd: string, value: string): string[] {
  const visited: string[] = [];
  const pending = (isAbsolute(value) ? value : join(cwd, value)).split(sep).filter((part) => part.length > 0);
  let current: string = sep;
  let links = 0;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === ".") continue;
    if (part === "..") {
      current = dirname(current);
      continue;
    }
    const next = join(current, part);
    let link: string | null = null;
    try {
      link = lstatSync(next).isSymbolicLink() ? readlinkSync(next) : null;
    } catch {
      link = null;
    }
    if (link === null || links >= MAX_LINKS) {
      current = next;
      continue;
    }
    links += 1;
    visited.push(next);
    pending.unshift(...link.split(sep).filter((piece) => piece.length > 0));
    if (isAbsolute(link)) current = sep;
  }
  visited.push(current);
  return visited;
}

/** The path with every link resolved (the last of {@link pathsOnTheWay}). */
function resolveLinks(path: string): string {
  const paths = pathsOnTheWay(sep, path);
  const last = paths[paths.length - 1]!;
  return existsSync(last) ? last : path;
}
