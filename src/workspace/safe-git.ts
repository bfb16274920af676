import { execFile, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
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
  /** `GIT_INDEX_FILE`: an index of the runner's own instead of the worktree's. */
  indexFile?: string;
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
function safeGitEnvironment(indexFile?: string): Record<string, string> {
  return {
    ...(indexFile ? { GIT_INDEX_FILE: indexFile } : {}),
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
    execFile(
      "git",
      command,
      { cwd: options.baseDirectory, env: safeGitEnvironment(options.indexFile), maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== "number") reject(error);
        else resolve({ exitCode: typeof error?.code === "number" ? error.code : 0, stdout, stderr });
      },
    );
  });
}

/** Where a streamed git command's standard output goes. */
export type StreamedGitOutput =
  /** Each NUL-terminated record (`-z` output) as it arrives, as bytes: names need not be UTF-8. */
  | { records: (record: Buffer) => void }
  /** Written straight to this file (created or truncated, mode 0600); never held in memory. */
  | { file: string }
  | { discard: true };

export interface StreamedGitResult {
  /** Null when git was killed (see `timedOut`). */
  exitCode: number | null;
  /** The first {@link STDERR_KEPT_BYTES} bytes of git's stderr. */
  stderr: string;
  /** True when `timeoutMs` passed and git was killed (SIGKILL). */
  timedOut: boolean;
}

/** stderr kept from a streamed git command; the rest is dropped (git prints a warning per path in some cases). */
const STDERR_KEPT_BYTES = 64 * 1024;

/**
 * Runs host git like {@link safeGitResult}, for output the agent can make
 * arbitrarily large (diffs, path lists): stdout is streamed to `output`,
 * never buffered whole, stderr is capped, `input` (if any) is its stdin, and
 * after `timeoutMs` git is killed. A non-zero exit or the timeout is an
 * answer; rejects only when git cannot be started or the output file cannot
 * be opened.
 */
export function streamSafeGit(
  options: SafeGitOptions,
  args: string[],
  output: StreamedGitOutput,
  run: { timeoutMs?: number; input?: Buffer } = {},
): Promise<StreamedGitResult> {
  const command = gitArguments(options, args);
  return new Promise((resolve, reject) => {
    const fileDescriptor = "file" in output ? openSync(output.file, "w", 0o600) : null;
    const child = spawn("git", command, {
      cwd: options.baseDirectory,
      env: safeGitEnvironment(options.indexFile),
      stdio: [run.input ? "pipe" : "ignore", fileDescriptor ?? ("records" in output ? "pipe" : "ignore"), "pipe"],
    });
    if (fileDescriptor !== null) closeSync(fileDescriptor);
    let timedOut = false;
    const timer =
      run.timeoutMs === undefined
        ? undefined
        : setTimeout(
            () => {
              timedOut = true;
              child.kill("SIGKILL");
            },
            Math.max(0, run.timeoutMs),
          );
    const stderr: Buffer[] = [];
    let stderrBytes = 0;
    child.stderr!.on("data", (chunk: Buffer) => {
      if (stderrBytes < STDERR_KEPT_BYTES) stderr.push(chunk.subarray(0, STDERR_KEPT_BYTES - stderrBytes));
      stderrBytes += chunk.length;
    });
    if ("records" in output) {
      let pending: Buffer = Buffer.alloc(0);
      child.stdout!.on("data", (chunk: Buffer) => {
        let data = pending.length ? Buffer.concat([pending, chunk]) : chunk;
        for (let end = data.indexOf(0); end !== -1; end = data.indexOf(0)) {
          output.records(data.subarray(0, end));
          data = data.subarray(end + 1);
        }
        pending = Buffer.from(data);
      });
      child.stdout!.on("end", () => {
        if (pending.length) output.records(pending);
      });
    }
    if (run.input) {
      // git may exit (an error, the timeout) before reading all of it.
      child.stdin!.on("error", () => undefined);
      child.stdin!.end(run.input);
    }
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ exitCode: timedOut ? null : code, stderr: Buffer.concat(stderr).toString("utf8"), timedOut });
    });
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
    listing = await rawSafeGit({ baseDirectory: repositoryDirectory }, ["config", "--name-only", "--get-regexp", "^(filter|diff|merge)\\."]);
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
