/**
 * Runs the built CLI on a pseudo-terminal, as a person at a terminal would:
 * util-linux `script` gives the runner a pty for stdin, stdout and stderr
 * (so `isTTY` holds and approval questions are asked), and copies what the
 * test writes to its stdin onto the pty. The runner's output (stdout and
 * stderr, merged by the terminal) comes back on script's stdout.
 *
 * Answers are typed only after the question is on the screen
 * ({@link TerminalCli.waitForOutput}), never after a fixed delay.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { CLI, waitFor, type CliResult } from "./runner-cli.js";

export interface TerminalCli {
  pid: number;
  /** Everything the terminal showed so far (ANSI colours included). */
  output(): string;
  /** Waits until `pattern` has appeared at least `count` times on the terminal; fails when the runner exits first. */
  waitForOutput(pattern: RegExp, count?: number, timeoutMs?: number): Promise<void>;
  /** Types a line (a newline is added). */
  type(line: string): void;
  /** Resolves when the runner has exited (stdin is closed then). */
  result: Promise<CliResult>;
  exited: CliResult | null;
  /** Kills script and the runner (test cleanup). */
  kill(): void;
}

/** Quotes one word for /bin/sh. */
function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Counts the matches of `pattern` (made global) in `text`. */
function countMatches(text: string, pattern: RegExp): number {
  const global = new RegExp(pattern.source, pattern.flags.includes("g") ? pattern.flags : `${pattern.flags}g`);
  return [...text.matchAll(global)].length;
}

/** Starts `node dist/cli/main.js ...args` on a new pseudo-terminal, with the test's environment on top of ours. */
export function startCliOnTerminal(args: string[], environment: Record<string, string>): TerminalCli {
  if (!existsSync(CLI)) throw new Error("dist/cli/main.js is missing: run `make build` (make test does)");
  const command = [process.execPath, CLI, ...args].map(shellQuote).join(" ");
  // -q quiet, -f flush at once, -e the child's exit status, -c the command; the typescript goes to /dev/null.
  const child = spawn("script", ["-qfec", command, "/dev/null"], { env: { ...process.env, ...environment, TERM: "dumb" }, stdio: ["pipe", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  const terminal: TerminalCli = {
    pid: child.pid!,
    output: () => output,
    exited: null,
    type(line) {
      child.stdin!.write(`${line}\n`);
    },
    async waitForOutput(pattern, count = 1, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      await waitFor(
        `${count} × ${pattern} on the terminal`,
        () => {
          if (countMatches(output, pattern) >= count) return true;
          if (terminal.exited) throw new Error(`the runner exited (code ${terminal.exited.code}) before ${count} × ${pattern} appeared; terminal:\n${output}`);
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${count} × ${pattern}; terminal:\n${output}`);
          return false;
        },
        { timeoutMs: timeoutMs + 1000 },
      );
    },
    kill() {
      if (!terminal.exited) child.kill("SIGKILL");
    },
    result: new Promise((resolve) => {
      child.on("close", (code, signal) => {
        terminal.exited = { code, signal, stdout: output, stderr: "" };
        resolve(terminal.exited);
      });
    }),
  };
  // Keep stdin open while the runner lives (script ends the session when its input ends); close it after.
  void terminal.result.then(() => child.stdin!.destroy());
  child.stdin!.on("error", () => undefined);
  return terminal;
}
