import { promptForApproval } from "../policy/approval-prompt.js";
import type { ApprovalBroker } from "../runner/runner.js";
import { terminalSafe } from "../terminal-text.js";
import type { ProgressView } from "./progress-view.js";

/** How long an approval question waits for an answer; no answer is a no. */
const APPROVAL_TIMEOUT_MS = 5 * 60 * 1000;

/**
 * The terminal prompt as an approval broker (`runner exec`, `runner agency
 * run|resume`); without a terminal on both ends, none (the policy's
 * `confirmations` decides). With the live `view`, the prompt waits until the
 * view has printed everything up to the question and holds the view's output
 * until it is answered, so the question stands on its own lines.
 */
export function terminalApprovals(view: ProgressView | null = null): { approvals?: ApprovalBroker } {
  if (!process.stdin.isTTY || !process.stderr.isTTY) return {};
  view?.expectApprovalPrompts();
  return {
    approvals: {
      request: async ({ question, canRemember, agentId, toolCallId }, signal) => {
        await view?.questionShown(agentId, toolCallId);
        try {
          return await promptForApproval({
            input: process.stdin,
            output: process.stderr,
            question: terminalSafe(question),
            canRemember,
            timeoutMs: APPROVAL_TIMEOUT_MS,
            signal,
          });
        } finally {
          view?.releaseAfterPrompt();
        }
      },
    },
  };
}
