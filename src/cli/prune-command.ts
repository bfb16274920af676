import { ConfigError } from "../errors.js";
import { pruneRuns, type PruneDecision } from "../run/prune-runs.js";
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
 * (src/run/prune-runs.ts), printing a line per run and a total; with
 * `--json` one decision object per line. Returns the exit code: 0, or 2 for
 * a bad `--older-than`.
 */
export async function pruneCommand(home: string, options: PruneCommandOptions): Promise<number> {
  const olderThanMs = options.olderThan === undefined ? undefined : parseAge(options.olderThan);
  const decisions = await pruneRuns(home, {
    ...(options.merged ? { merged: true } : {}),
    ...(olderThanMs === undefined ? {} : { olderThanMs }),
    ...(options.dryRun ? { dryRun: true } : {}),
    ...(options.force ? { force: true } : {}),
    ...(options.referenced ? { referenced: true } : {}),
  });
  if (options.json) {
    for (const { runId, branches, action, reason, unmergedCommits } of decisions) {
      const record = { run_id: runId, branches, action, reason, unmerged_commits: unmergedCommits };
      process.stdout.write(`${terminalSafeJson(JSON.stringify(record))}\n`);
    }
    return 0;
  }
  for (const decision of decisions) process.stdout.write(`${terminalSafe(line(decision))}\n`);
  const gone = decisions.filter((decision) => decision.action !== "kept");
  const branches = gone.reduce((sum, decision) => sum + decision.branches.length, 0);
  const keptCount = decisions.length - gone.length;
  const verb = options.dryRun ? "would remove" : "removed";
  process.stdout.write(
    `${verb} ${gone.length} run${gone.length === 1 ? "" : "s"} and ${branches} branch${branches === 1 ? "" : "es"}; kept ${keptCount}${options.dryRun ? " (dry run: nothing removed)" : ""}\n`,
  );
  return 0;
}

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
