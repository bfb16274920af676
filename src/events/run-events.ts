import type { McpEvent } from "../mcp/mcp-events.js";
import type { Usage } from "../model/messages.js";
import type { LeftOutPath } from "../workspace/commit-selection.js";

/**
 * Everything a run reports, noun-then-verb. `data` shapes are part of the
 * events.jsonl contract (version {@link EVENT_SCHEMA_VERSION}); add fields,
 * never change their meaning.
 */
export const EVENT_SCHEMA_VERSION = 1;

export type RunEvent =
  | McpEvent
  | { type: "run.started"; data: { run_id: string; task: string; workspace: string; branch: string; base_commit: string } }
  | { type: "sandbox.created"; data: { sandbox_id: string; image: string; ready_ms: number; uid: number } }
  | {
      type: "hook.finished" | "hook.failed";
      data: {
        phase: "pre_tool_use" | "post_tool_use";
        command: string;
        tool_name: string;
        tool_call_id: string;
        exit_code: number | null;
        timed_out: boolean;
        outcome: "allowed" | "blocked" | "noted" | "failed";
        error?: string;
      };
    }
  | { type: "tool_call.denied"; data: { agent_id: string; tool_call_id: string; name: string; rule: string; reason: string } }
  /** A call the policy rates `confirm` waits for an answer (a terminal, or the library's ApprovalBroker). */
  | { type: "approval.requested"; data: { agent_id: string; tool_call_id: string; name: string; question: string; can_remember: boolean } }
  /** The answer arrived (`no` with `timed_out` when nobody answered in time); the call then goes on or is denied. */
  | { type: "approval.resolved"; data: { agent_id: string; tool_call_id: string; answer: "yes" | "always" | "no"; reason: string | null; timed_out: boolean } }
  | { type: "skills.loaded"; data: { skills: string[]; shadowed: string[]; problems: string[] } }
  | { type: "sandbox.restarted"; data: { sandbox_id: string } }
  /** How the run's `sandbox.limits.disk` is held; `detail` says why it is only monitored. */
  | { type: "disk.prepared"; data: { limit_bytes: number; enforcement: "filesystem" | "monitor"; detail: string | null } }
  /** Once per run: a sandbox found the disk limit reached (`refused`: writes past it fail; `stopped`: its processes were killed and the run ends). */
  | {
      type: "disk.limit_reached";
      data: { agent_id: string; sandbox_id: string; used_bytes: number; limit_bytes: number; enforcement: "filesystem" | "monitor"; action: "refused" | "stopped" };
    }
  | { type: "run.resumed"; data: { run_id: string; resumes: number; next_step: number; worktree: "reused" | "recreated" } }
  | {
      type: "model_call.started";
      /** `prefix_stable`: the request extends the previous one exactly (null for an agent's first request). */
      data: { agent_id: string; step: number; messages: number; estimated_tokens: number; prefix_stable: boolean | null };
    }
  | {
      type: "model_call.retrying";
      data: { agent_id: string; step: number; purpose: "turn" | "compaction"; attempt: number; delay_ms: number; reason: string; status?: number };
    }
  | { type: "model_call.finished"; data: { agent_id: string; step: number; duration_ms: number; usage: Usage; tool_calls: number; content: string | null } }
  | { type: "tool_call.started"; data: { agent_id: string; step: number; tool_call_id: string; name: string; arguments: string } }
  | {
      type: "tool_call.finished";
      data: { agent_id: string; step: number; tool_call_id: string; name: string; is_error: boolean; duration_ms: number; result_preview: string; details?: Record<string, unknown> };
    }
  | { type: "tool_call.replayed"; data: { agent_id: string; step: number; tool_call_id: string; name: string; key: string } }
  | { type: "tool_call.interrupted"; data: { agent_id: string; step: number; tool_call_id: string; name: string } }
  | { type: "context.repaired"; data: { agent_id: string; step: number; repairs: string[] } }
  | { type: "context.cleared"; data: { agent_id: string; step: number; cleared: number; kept: number; tokens_before: number; tokens_after: number } }
  | {
      type: "context.compacted";
      data: { agent_id: string; step: number; summarised_messages: number; kept_messages: number; tokens_before: number; tokens_after: number; duration_ms: number };
    }
  | { type: "context.compaction_failed"; data: { agent_id: string; step: number; error: string } }
  | { type: "context.summary_usage"; data: { agent_id: string; usage: Usage } }
  | { type: "task.started"; data: { task_id: string; kind: "agent" | "shell"; description: string; background: boolean; agent_id: string | null } }
  | { type: "task.finished"; data: { task_id: string; kind: "agent" | "shell"; status: string; duration_ms: number; agent_id: string | null } }
  | {
      type: "subagent.started";
      data: { agent_id: string; parent_id: string; mode: "explore" | "worker"; description: string; branch: string | null; fork: boolean; background: boolean };
    }
  | {
      type: "subagent.finished";
      data: { agent_id: string; status: string; steps: number; verify_passed: boolean | null; merge: string | null; files: string[]; duration_ms: number };
    }
  | { type: "agent.finished"; data: { agent_id: string; reason: "final_answer" | "max_steps" | "cancelled"; steps: number; final_message: string | null } }
  | {
      type: "workspace.committed";
      /** `left_out`: paths not committed (first 100), `left_out_count` all of them; `timed_out`: nothing was committed. */
      data: { branch: string; commit: string; changed: boolean; left_out: LeftOutPath[]; left_out_count: number; timed_out: boolean };
    }
  | { type: "workspace.merged"; data: { merged: boolean; branch: string | null; detail: string } }
  | { type: "verify.started"; data: { command: string } }
  | { type: "verify.protected"; data: { patterns: string[]; from_commit: string; restored: string[]; deleted: string[]; omitted: number } }
  | {
      type: "verify.finished";
      data: { command: string; exit_code: number | null; passed: boolean; timed_out: boolean; duration_ms: number; output_tail: string; sandbox_lost: string | null };
    }
  | { type: "network.allowed"; data: { method: string; host: string; port: number } }
  | { type: "network.denied"; data: { method: string; host: string; port: number; reason: string } }
  | { type: "network.proxy_exited"; data: { detail: string } }
  | { type: "cleanup.failed"; data: { what: string; error: string } }
  // ---- sandbox.setup (issue 14; src/run/setup-commands.ts) ----
  /** A `sandbox.setup` command starts: in the main agent's sandbox before its first step (`agent`), or in a verification's checkout (`verify`). */
  | { type: "setup.started"; data: { agent_id: string; phase: "agent" | "verify"; index: number; command: string } }
  /** It ended; `output_tail`: the last 1000 characters of stdout then stderr. A failure stops the rest of the list. */
  | {
      type: "setup.finished";
      data: { agent_id: string; phase: "agent" | "verify"; index: number; command: string; exit_code: number | null; timed_out: boolean; duration_ms: number; output_tail: string };
    }
  // ---- end sandbox.setup ----
  | { type: "run.finished"; data: { status: string; exit_code: number; duration_ms: number; error?: string } };


/** Receives events as they happen. Implementations must not throw. */
export interface EventSink {
  emit(event: RunEvent): void;
}

/** Fans one event out to several sinks. */
export class EventFanout implements EventSink {
  private readonly sinks: EventSink[] = [];
  add(sink: EventSink): this {
    this.sinks.push(sink);
    return this;
  }
  emit(event: RunEvent): void {
    for (const sink of this.sinks) sink.emit(event);
  }
}
