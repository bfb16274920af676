import { accessSync, constants, existsSync, mkdirSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { ConfigError, errorMessage } from "../errors.js";
import type { DiskEnforcementChoice } from "../workspace/run-disk.js";

/**
 * `$RUNNER_HOME` (default `~/.runner`), created if missing. Throws ConfigError
 * naming RUNNER_HOME when it cannot be a writable directory.
 */
export function runnerHome(environment: NodeJS.ProcessEnv = process.env): string {
  const home = resolve(environment.RUNNER_HOME || join(homedir(), ".runner"));
  // One level at a time: a recursive mkdir under /proc or /sys can spin forever (Node 20).
  const missing: string[] = [];
  let existing = home;
  while (!existsSync(existing)) {
    missing.unshift(existing);
    existing = dirname(existing);
  }
  try {
    if (!statSync(existing).isDirectory()) throw new Error(`${existing} is not a directory`);
    for (const directory of missing) mkdirSync(directory, { mode: 0o700 });
    accessSync(home, constants.W_OK);
  } catch (error) {
    throw new ConfigError(`RUNNER_HOME: cannot use ${home} for run records (${errorMessage(error)}); point RUNNER_HOME at a writable directory`);
  }
  return home;
}

/**
 * `$RUNNER_DISK_ENFORCEMENT`: `monitor` makes every run measure its disk limit
 * instead of giving it a filesystem of its own (docs/security.md "Security model");
 * unset or `auto`: a filesystem when the runner can make one. Throws ConfigError otherwise.
 */
export function diskEnforcementChoice(environment: NodeJS.ProcessEnv = process.env): DiskEnforcementChoice {
  const value = environment.RUNNER_DISK_ENFORCEMENT || "auto";
  if (value !== "auto" && value !== "monitor") throw new ConfigError(`RUNNER_DISK_ENFORCEMENT: expected "auto" or "monitor", got ${JSON.stringify(value)}`);
  return value;
}
