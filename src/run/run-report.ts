import type { SubagentReport } from "../agents/subagents.js";
import type { Usage } from "../model/messages.js";
import type { Pricing } from "../model/pricing.js";
import type { LeftOutPath } from "../workspace/commit-selection.js";
import type { UserMergeOutcome } from "../workspace/merge.js";
import type { VerifyResult } from "../delivery/verify-commit.js";

export type { ProtectedPaths, VerifyResult } from "../delivery/verify-commit.js";
import type { InstructionFileRecord } from "../skills/project-instructions.js";

export type RunStatus = "succeeded" | "failed" | "error" | "cancelled";

/** report.json (DESIGN.md "Outcomes"); extra fields are additive. */
export interface RunReport {
  run_id: string;
  trace_id: string;
  task: string;
  status: RunStatus;
  /** Why the run ended this way, e.g. `verified`, `verify_failed`, `max_steps`, `budget_exceeded`, `timed_out`, `rate_limited`. */
  reason: string;
  error: string | null;
  verify: VerifyResult | null;
  /** The host commit of the run's worktree: its limits and what it left out; null before it ran. */
  commit: CommitReport | null;
  branch: string | null;
  base_commit: string | null;
  head_commit: string | null;
  patch: string | null;
  final_message: string | null;
  steps: number;
  tool_calls: number;
  /** Tokens of every model call of the run (subagents' and compactions' included): all prompt tokens, cache reads, cache writes, completion tokens. */
  usage: Usage;
  /**
   * What the run's model calls cost, USD (subagents' and compactions' included), priced by `pricing`;
   * null when the model is not priced (`pricing.unpriced` says why).
   */
  cost_usd: number | null;
  /** How the calls were priced: the model id, USD per million tokens, and where the prices come from. */
  pricing: Pricing;
  /**
   * Share of model requests whose messages extend the previous request's
   * exactly (what a provider's prompt cache can reuse); null before a second request.
   */
  prefix_stable_ratio: number | null;
  /** Context management: requests, largest estimated request (tokens), clearings, compactions, repairs. */
  context: {
    context_window: number;
    requests: number;
    max_request_tokens: number;
    cleared: number;
    compactions: number;
    compaction_failures: number;
    repairs: number;
  };
  /** How often `runner resume` continued this run. */
  resumes: number;
  /** The subagents the main agent started (steps, calls and tokens of theirs are counted here, tokens also in `usage`). */
  agents: SubagentReport[];
  /** The policy the run used (its `name`). */
  policy: string;
  /** Refused tool calls per rule id (policy rules, `hooks.pre_tool_use`); a success with any says `..._with_denials`. */
  denials: Record<string, number>;
  /** `on_success: merge` / `--merge`: whether the run branch landed on your branch, and why not. */
  merge: UserMergeOutcome | null;
  /** Egress proxy decisions per `host:port` (empty without an allow-list). */
  network: Record<string, { allowed: number; denied: number }>;
  /**
   * `sandbox.limits.disk` and how it was held (docs/security.md "Security model"): `filesystem`
   * (writes past it were refused) or `monitor` (`detail` says why; over the limit the
   * run stopped, reason `disk_limit_exceeded`); `used_bytes` when the limit was reached.
   * Null when the run ended before its disk was made.
   */
  disk: { limit_bytes: number; enforcement: "filesystem" | "monitor"; detail: string | null; limit_reached: boolean; used_bytes: number | null } | null;
  /**
   * The project instruction files (AGENTS.md, CLAUDE.md, GEMINI.md) of the base commit put in the agents'
   * system prompt, in prompt order (docs/skills.md "Project instructions"); null when `instructions_files: false`
   * or the run ended before its sandbox was up.
   */
  instructions_files: InstructionFileRecord[] | null;
  duration_ms: number;
}

/** report.json `commit`. */
export interface CommitReport {
  /** The limits in force: bytes, bytes, seconds (task.yaml `commit`). */
  limits: { max_file_size: number; max_total_size: number; timeout_sec: number };
  /** Paths of the worktree not committed, and why (at most 100; `left_out_count` counts them all). */
  left_out: LeftOutPath[];
  left_out_count: number;
  /** The commit ran past `limits.timeout_sec`: nothing of it was committed (reason `commit_timed_out`). */
  timed_out: boolean;
  /** Writing patch.diff ran past the same limit: there is no patch.diff. */
  patch_timed_out: boolean;
}

/**
 * `runner exec`'s exit code when the run succeeded but the merge it was asked
 * for (`--merge`, `on_success: merge`) did not happen: the work is verified
 * and on the run branch, not on yours (report.json `merge.detail` says why).
 * Its own code, so a script's `runner exec --merge && git push` stops there.
 */
const NOT_MERGED_EXIT_CODE = 4;

/**
 * Exit code of `runner exec` for a finished run: {@link exitCodeFor} its
 * status, except {@link NOT_MERGED_EXIT_CODE} for a success whose requested
 * merge did not happen, and 2 (bad input) for an error with reason
 * `task_invalid` (the task was refused at its start, before any model call).
 */
export function exitCodeOfReport(report: Pick<RunReport, "status" | "merge"> & Partial<Pick<RunReport, "reason">>): number {
  // A task refused at its start (its verify or setup program is not in its image) is bad input, as a bad task file is.
  if (report.status === "error" && report.reason === "task_invalid") return 2;
  return report.status === "succeeded" && report.merge !== null && !report.merge.merged ? NOT_MERGED_EXIT_CODE : exitCodeFor(report.status);
}

/** Exit code of `runner exec` for a status (DESIGN.md "Outcomes"). */
function exitCodeFor(status: RunStatus): number {
  switch (status) {
    case "succeeded":
      return 0;
    case "failed":
      return 1;
    case "cancelled":
      return 130;
    case "error":
      return 3;
  }
}
