import { randomUUID } from "node:crypto";
import type { ApprovalAnswer } from "../policy/approval.js";
import type { ApprovalBroker, ApprovalRequest } from "./runner.js";

/** One question waiting in an {@link ApprovalInbox}. */
export interface PendingApproval {
  /** Unique in the inbox (a UUID): what an answer names. */
  id: string;
  /** The run, the call (agent, tool call id, tool, subject), the rule, the question. */
  request: ApprovalRequest;
  /** When it was asked (ms since the epoch). */
  askedAt: number;
  /** When the non-interactive answer applies if nobody answers (ms since the epoch). */
  deadline: number;
}

export interface ApprovalInboxOptions {
  /** How long a question waits for an answer, in ms (default 5 minutes, as the terminal prompt). */
  timeoutMs?: number;
  /** Called after a question is added or leaves (answered, timed out, the run stopped waiting). */
  onChange?: (change: { kind: "requested" | "resolved"; approval: PendingApproval; answer?: ApprovalAnswer }) => void;
  /** The clock (ms since the epoch); tests inject one. */
  now?: () => number;
}

/**
 * An {@link ApprovalBroker} whose questions wait in a list until someone
 * answers them by id: the HTTP API's approvals inbox (`runner serve`) and the
 * MCP server's `run_approve` (`runner mcp`). Any number of runs share one.
 *
 * A question nobody answers within `timeoutMs` is answered "no" with
 * `timedOut: true`, as the terminal prompt does; a run that stops waiting
 * (cancelled, the call's deadline) takes its question out of the list.
 */
export class ApprovalInbox implements ApprovalBroker {
  /** Each question waits and is answered on its own: an agency's invocations may ask at once. */
  readonly concurrent = true;
  private readonly waiting = new Map<string, { approval: PendingApproval; settle: (answer: ApprovalAnswer) => void }>();
  private readonly timeoutMs: number;
  private readonly now: () => number;

  constructor(private readonly options: ApprovalInboxOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 5 * 60 * 1000;
    this.now = options.now ?? Date.now;
  }

  request(request: ApprovalRequest, signal: AbortSignal): Promise<ApprovalAnswer> {
    const askedAt = this.now();
    const approval: PendingApproval = { id: randomUUID(), request, askedAt, deadline: askedAt + this.timeoutMs };
    return new Promise<ApprovalAnswer>((resolve) => {
      const timer = setTimeout(
        () => settle({ answer: "no", reason: `no answer within ${Math.round(this.timeoutMs / 1000)} s`, timedOut: true }),
        this.timeoutMs,
      );
      timer.unref?.();
      const onAbort = () => settle({ answer: "no", reason: "the run stopped waiting" });
      const settle = (answer: ApprovalAnswer) => {
        if (!this.waiting.delete(approval.id)) return;
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        this.options.onChange?.({ kind: "resolved", approval, answer });
        resolve(answer);
      };
      this.waiting.set(approval.id, { approval, settle });
      signal.addEventListener("abort", onAbort, { once: true });
      this.options.onChange?.({ kind: "requested", approval });
      if (signal.aborted) onAbort();
    });
  }

  /** Questions waiting now, oldest first; only those of `runId` when given. */
  pending(runId?: string): PendingApproval[] {
    return [...this.waiting.values()].map((entry) => entry.approval).filter((approval) => runId === undefined || approval.request.runId === runId);
  }

  /**
   * Answers question `id`. Returns false when no such question waits (already
   * answered, timed out, or never asked), so a late second answer changes nothing.
   */
  answer(id: string, answer: ApprovalAnswer): boolean {
    const entry = this.waiting.get(id);
    if (!entry) return false;
    entry.settle(answer);
    return true;
  }
}
