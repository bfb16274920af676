import { ConfigError } from "../errors.js";
import { pruneRuns, recordedRepositories, unrecordedRunBranches, type PruneDecision } from "../run/prune-runs.js";
import { terminalSafe, terminalSafeJson } from "../terminal-text.js";

export interface PruneCommandOptions {
  merged?: boolean;
  olderThan?: string;
  dryRun?: boolean;
  force?: boolean;
  referenced?: boolean;
  json?: boolean;
}

/**
 * `runner prune`: removes ended runs' branches and run directories
 * (src/run/prune-runs.ts), printing a line per run and a total, then a
 * `kept` line per run branch no record accounts for (never removed); with
 * `--json` one decision object per line (those with `run_id: null` and their
 * `repository`). Returns the exit code: 0, or 2 for
 * a bad `--older-than`.
 */
export async function pruneCommand(home: string, options: PruneCommandOptions): Promise<number> {
  const olderThanMs = options.olderThan === undefined ? undefined : parseAge(options.olderThan);
  // Named before the removals: a repository whose last run is pruned now is still looked at.
  const repositories = recordedRepositories(home);
  const decisions = await pruneRuns(home, {
    ...(options.merged ? { merged: true } : {}),
    ...(olderThanMs === undefined ? {} : { olderThanMs }),
    ...(options.dryRun ? { dryRun: true } : {}),
    ...(options.force ? { force: true } : {}),
    ...(options.referenced ? { referenced: true } : {}),
  });
  // After the removals: what is left under runner/ that no record of this home accounts for.
  const unrecorded = await unrecordedRunBranches(home, repositories);
  if (options.json) {
    for (const { runId, branches, action, reason, unmergedCommits } of decisions) {
      const record = { run_id: runId, branches, action, reason, unmerged_commits: unmergedCommits };
      process.stdout.write(`${terminalSafeJson(JSON.stringify(record))}\n`);
    }
    for (const { repository, branch } of unrecorded) {
      const record = { run_id: null, branches: [branch], repository, action: "kept", reason: UNRECORDED_REASON, unmerged_commits: null };
      process.stdout.write(`${terminalSafeJson(JSON.stringify(record))}\n`);
    }
    return 0;
  }
  for (const decision of decisions) process.stdout.write(`${terminalSafe(line(decision))}\n`);
  for (const { repository, branch } of unrecorded) {
    process.stdout.write(`${terminalSafe(`${"kept".padEnd(12)} ${branch}  in ${repository}  (${UNRECORDED_REASON}; \`git branch -D\` it if it is yours)`)}\n`);
  }
  const gone = decisions.filter((decision) => decision.action !== "kept");
  const branches = gone.reduce((sum, decision) => sum + decision.branches.length, 0);
  const keptCount = decisions.length - gone.length;
  const verb = options.dryRun ? "would remove" : "removed";
  process.stdout.write(
    `${verb} ${gone.length} run${gone.length === 1 ? "" : "s"} and ${branches} branch${branches === 1 ? "" : "es"}; kept ${keptCount}` +
      `${unrecorded.length ? ` and ${unrecorded.length} branch${unrecorded.length === 1 ? "" : "es"} without a run record` : ""}${options.dryRun ? " (dry run: nothing removed)" : ""}\n`,
  );
  return 0;
}

/** Why a run branch without a record is listed and left ({@link unrecordedRunBranches}). */
const UNRECORDED_REASON = "no run record in this RUNNER_HOME: another home's run, or one whose directory is gone";

function line(decision: PruneDecision): string {
  const action = { remove: "would remove", removed: "removed", kept: "kept" }[decision.action];
  const branches = decision.branches.length ? `  ${decision.branches.join(" ")}` : "";
  return `${action.padEnd(12)} ${decision.runId}${branches}  (${decision.reason})`;
}

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * An age such as `7d`, `12h`, `2w`, `30m`, `90s` (no unit: days), in ms.
 * Throws ConfigError naming `--older-than` for anything else.
 */
function parseAge(value: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$/i.exec(value);
  if (!match) throw new ConfigError(`--older-than: expected an age such as "7d", "12h" or "2w" (s, m, h, d, w), got "${value}"`);
  return Math.round(Number(match[1]) * UNITS[(match[2] || "d").toLowerCase()]!);
}
