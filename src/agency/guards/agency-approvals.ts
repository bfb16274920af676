import { createHash } from "node:crypto";
import { Mutex } from "async-mutex";
import type { AgencyEvent } from "../../bus/event-bus.js";
import type { ApprovalAnswer } from "../../policy/approval.js";
import type { ApprovalAgency, ApprovalBroker, RunHandle } from "../../runner/runner.js";

/** The agency's approval events (docs/agency.md "Human gates: confirm"). */
const APPROVAL_REQUESTED = "agency.approval.requested";
const APPROVAL_RESOLVED = "agency.approval.resolved";

/** The rule id under which the policy counts a call refused by its `tools.confirm` (src/policy/permission-checker.ts). */
const CONFIRM_RULE = /^tools\.confirm\[\d+\]$/;

/** The run events whose denials this module reads when nobody can be asked. */
const DENIED_EVENT = /^dev\.agent-runner\.tool_call\.denied\.v\d+$/;

/** One invocation the approvals are for: its id, its agent, and the event it serves (the cause of its approval events). */
interface ApprovalInvocation {
  invocationId: string;
  agent: string;
  event: AgencyEvent;
}

/** Publishes an approval event of `invocation` with `data`, under the derived id `id` (a resume publishing it again dedupes). */
type PublishApproval = (type: string, invocation: ApprovalInvocation, id: string, data: Record<string, unknown>) => Promise<void>;

/**
 * The agency's human gates (`confirm`, agency-wide and per agent; issue 22
 * item 5). The generated policy of each agent lists those tools under
 * `tools.confirm` with `confirmations: prompt`, so a run asks before each
 * such call. With the agency's broker (`runner agency run` on a terminal:
 * the prompt; the library: `approvals`; `runner serve`: its inbox) every
 * question goes to it, naming the agency, agent and invocation
 * (`ApprovalRequest.agency`): one at a time across all invocations (a
 * terminal shows one question) unless the broker is `concurrent` (an inbox
 * shows them all), each recorded as `agency.approval.requested` and
 * `agency.approval.resolved` (`by: "broker"`, and `timed_out` when nobody
 * answered in the broker's time). Without one, the run is given no broker: the policy's
 * answer for calls nobody can be asked applies (refused, and the model is
 * told "there is no terminal to ask"), and the agency records each such
 * refusal of a `confirm` gate as `agency.approval.resolved` with
 * `by: "policy"` and `asked: false`. An invocation that then fails has its
 * stop classed `needs_approval` ({@link unapprovedCalls}).
 */
export class AgencyApprovals {
  private readonly questions = new Mutex();
  private readonly refused = new Map<string, number>();

  constructor(
    private readonly broker: ApprovalBroker | null,
    private readonly agencyId: string,
    private readonly publish: PublishApproval,
  ) {}

  /** The broker to give the invocation's run, or undefined when nobody can be asked (then call {@link follow}). */
  brokerFor(invocation: ApprovalInvocation): ApprovalBroker | undefined {
    const broker = this.broker;
    if (broker === null) return undefined;
    return {
      request: async (approval, signal) => {
        const id = `${invocation.invocationId}-approval-${createHash("sha256").update(`${approval.runId}\0${approval.toolCallId}`).digest("hex").slice(0, 12)}`;
        const call = { approval_id: id, invocation_id: invocation.invocationId, agent: invocation.agent, run_id: approval.runId, tool: approval.toolName };
        await this.publish(APPROVAL_REQUESTED, invocation, `${id}-requested`, {
          ...call,
          subject: approval.subject,
          rule: approval.rule,
          reason: approval.reason,
          question: approval.question,
        });
        const agency: ApprovalAgency = { agencyId: this.agencyId, agent: invocation.agent, invocationId: invocation.invocationId };
        const ask = () =>
          broker.request({ ...approval, question: `agent ${invocation.agent} (${invocation.invocationId}): ${approval.question}`, agency }, signal);
        const answer: ApprovalAnswer = await (broker.concurrent ? ask() : this.questions.runExclusive(ask));
        if (answer.answer === "no") this.count(invocation.invocationId);
        await this.publish(APPROVAL_RESOLVED, invocation, `${id}-resolved`, {
          ...call,
          answer: answer.answer,
          reason: answer.answer === "no" ? (answer.reason ?? null) : null,
          by: "broker",
          asked: true,
          timed_out: answer.answer === "no" && answer.timedOut === true,
        });
        return answer;
      },
    };
  }

  /**
   * Without a broker: reads the run's `tool_call.denied` events and records
   * each refusal of a `confirm` gate. Resolves when the run's events end.
   */
  async follow(invocation: ApprovalInvocation, handle: Pick<RunHandle, "id" | "events">): Promise<void> {
    if (this.broker !== null) return;
    for await (const envelope of handle.events({ from: 0 })) {
      if (!DENIED_EVENT.test(envelope.type)) continue;
      const denied = envelope.data as { tool_call_id: string; name: string; rule: string; reason: string };
      if (!CONFIRM_RULE.test(denied.rule)) continue;
      this.count(invocation.invocationId);
      const id = `${invocation.invocationId}-approval-${createHash("sha256").update(`${handle.id}\0${denied.tool_call_id}`).digest("hex").slice(0, 12)}`;
      await this.publish(APPROVAL_RESOLVED, invocation, `${id}-resolved`, {
        approval_id: id,
        invocation_id: invocation.invocationId,
        agent: invocation.agent,
        run_id: handle.id,
        tool: denied.name,
        answer: "no",
        reason: denied.reason,
        by: "policy",
        asked: false,
        timed_out: false,
      });
    }
  }

  /** How many of the invocation's gated calls were refused or went unanswered (this process's count). */
  unapprovedCalls(invocationId: string): number {
    return this.refused.get(invocationId) ?? 0;
  }

  private count(invocationId: string): void {
    this.refused.set(invocationId, (this.refused.get(invocationId) ?? 0) + 1);
  }
}
