import type { Usage } from "../model/messages.js";

export type RunStatus = "succeeded" | "failed" | "error" | "cancelled";

/** report.json (DESIGN.md "Outcomes"); extra fields are additive. */
export interface RunReport {
  run_id: string;
  trace_id: string;
  task: string;
  status: RunStatus;
  /** Why the run ended this way, e.g. `verified`, `verify_failed`, `max_steps`, `rate_limited`. */
  reason: string;
  error: string | null;
  verify: { command: string; exit_code: number | null; passed: boolean; timed_out: boolean; output_tail: string } | null;
  branch: string | null;
  base_commit: string | null;
  head_commit: string | null;
  patch: string | null;
  final_message: string | null;
  steps: number;
  tool_calls: number;
  usage: Usage;
  /** Egress proxy decisions per `host:port` (empty without an allow-list). */
  network: Record<string, { allowed: number; denied: number }>;
  duration_ms: number;
}

/** Exit code of `runner exec` for a status (DESIGN.md "Outcomes"). */
export function exitCodeFor(status: RunStatus): number {
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
