import { execFile, spawn } from "node:child_process";
import { privateDirectory } from "../process/private-directory.js";

/**
 * Host-side git that a hostile worktree cannot turn into code execution
 * (DESIGN.md invariant 3). The agent may rewrite anything in its worktree:
 * `.git` files, `.gitattributes`, nested repositories with their own config.
 * So every host git call here:
 * - starts from an environment with no inherited `GIT_*` variable, no system or
 *   global config (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`) and an
 *   empty HOME, so only the repository's own config (written by the user, never
 *   mounted writable into a container) is read;
 * - names the git directory and work tree explicitly, so a `.git` file the agent
 *   planted never redirects git;
 * - overrides, on the command line (which wins over any config file), every
 *   setting that runs a program: hooks, fsmonitor, and each filter, diff and
 *   merge driver the repository's config defines; submodules are not recursed.
 *
 * Arguments go to git as an argv array (`execFile`, no shell); only the
 * runner builds them.
 */
export interface SafeGitOptions {
  /** Directory git runs in. */
  baseDirectory: string;
  /** Explicit `--git-dir`; when set, `workTree` should be too. */
  gitDirectory?: string;
  workTree?: string;
  /** Extra `-c key=value` overrides, e.g. the driver overrides from {@link driverOverrides}. */
  config?: string[];
}

let emptyHome: string | null = null;

/** An empty HOME for host git (nothing is ever written to it). */
function gitHome(): string {
  emptyHome ??= privateDirectory("agent-runner-git-home");
  return emptyHome;
}

const BASE_CONFIG = [
  // A path that never holds hooks.
  "core.hooksPath=/dev/null/no-hooks",
  "core.fsmonitor=false",
  "core.untrackedCache=false",
  "core.attributesFile=/dev/null",
  "core.askPass=",
  "core.pager=cat",
  "diff.external=",
  "diff.ignoreSubmodules=all",
  "submodule.recurse=false",
  "status.submoduleSummary=false",
  "commit.gpgSign=false",
  "tag.gpgSign=false",
  "gc.auto=0",
  "maintenance.auto=false",
  "safe.directory=*",
  "user.name=agent-runner",
  "user.email=agent-runner@localhost",
];

/** The environment every host git process gets: nothing inherited but PATH and locale. */
export function safeGitEnvironment(): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: gitHome(),
    LANG: "C",
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_ATTR_NOSYSTEM: "1",
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: "/bin/false",
    GIT_EDITOR: "/bin/false",
  };
}

/** Host git's arguments for `args`: the disarming `-c` list, the overrides, explicit `--git-dir`/`--work-tree`. */
function gitArguments(options: SafeGitOptions, args: string[]): string[] {
  return [
    ...[...BASE_CONFIG, ...(options.config ?? [])].flatMap((entry) => ["-c", entry]),
    ...(options.gitDirectory ? [`--git-dir=${options.gitDirectory}`] : []),
    ...(options.workTree ? [`--work-tree=${options.workTree}`] : []),
    ...args,
  ];
}

/** Host git failed (non-zero exit); the message carries git's stderr. */
export class GitCommandError extends Error {
  constructor(
    readonly args: string[],
    readonly exitCode: number,
    readonly stderr: string,
  ) {
    super(stderr.trim() || `git ${args.join(" ")} exited with ${exitCode}`);
    this.name = "GitCommandError";
  }
}

/**
 * Runs git on the host with {@link safeGitEnvironment} and the disarming
 * config, resolving with its stdout; rejects with {@link GitCommandError} on a
 * non-zero exit. Plain `execFile`: simple-git waits 50 ms after every command
 * that prints nothing (its completion detection), which cost ~600 ms per
 * worker subagent (bench/README.md "Subagents").
 */
export async function rawSafeGit(options: SafeGitOptions, args: string[]): Promise<string> {
  const result = await safeGitResult(options, args);
  if (result.exitCode !== 0) throw new GitCommandError(args, result.exitCode, result.stderr);
  return result.stdout;
}

/**
 * Like {@link rawSafeGit}, but a non-zero exit is an answer, not an error
 * (e.g. `git merge-tree` exits 1 on conflicts). Rejects only when git cannot run.
 */
export function safeGitResult(options: SafeGitOptions, args: string[]): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const command = gitArguments(options, args);
  return new Promise((resolve, reject) => {
    execFile("git", command, { cwd: options.baseDirectory, env: safeGitEnvironment(), maxBuffer: 64 * 1024 * 1024, encoding: "utf8" }, (error, stdout, stderr) => {
      if (error && typeof error.code !== "number") reject(error);
      else resolve({ exitCode: typeof error?.code === "number" ? error.code : 0, stdout, stderr });
    });
  });
}

/**
 * Like {@link rawSafeGit}, with stdout as bytes (paths from `-z` output are
 * not necessarily UTF-8) and optional bytes on stdin. Rejects with
 * {@link GitCommandError} on a non-zero exit.
 */
export function safeGitBytes(options: SafeGitOptions, args: string[], input?: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn("git", gitArguments(options, args), { cwd: options.baseDirectory, env: safeGitEnvironment(), stdio: ["pipe", "pipe", "pipe"] });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) resolve(Buffer.concat(stdout));
      else reject(new GitCommandError(args, code ?? -1, Buffer.concat(stderr).toString("utf8")));
    });
    child.stdin.on("error", () => undefined); // git may exit before reading all of it
    child.stdin.end(input ?? null);
  });
}

/**
 * `-c` overrides that disarm every filter, diff and merge driver named in the
 * repository's config: an empty command means "no driver", and `required=false`
 * keeps a disarmed filter from failing the command. Verified against git 2.39.
 */
export async function driverOverrides(repositoryDirectory: string): Promise<string[]> {
  let listing = "";
  try {
    listing = await rawSafeGit({ baseDirectory: repositoryDirectory }, [
      "config",
      "--name-only",
      "--get-regexp",
      "^(filter|diff|merge)\\.",
    ]);
  } catch {
    return []; // exit 1: no such keys
  }
  const overrides = new Set<string>();
  for (const key of listing.split("\n")) {
    const match = /^(filter|diff|merge)\.(.+)\.([^.]+)$/.exec(key.trim());
    if (!match) continue;
    const [, section, name] = match;
    if (section === "filter") {
      for (const field of ["clean", "smudge", "process"]) overrides.add(`filter.${name}.${field}=`);
      overrides.add(`filter.${name}.required=false`);
    } else if (section === "diff") {
      overrides.add(`diff.${name}.command=`);
      overrides.add(`diff.${name}.textconv=`);
    } else {
      overrides.add(`merge.${name}.driver=`);
    }
  }
  return [...overrides];
}
