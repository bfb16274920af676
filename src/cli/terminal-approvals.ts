import { promptForApproval } from "../policy/approval-prompt.js";
import type { ApprovalBroker } from "../runner/runner.js";
import { terminalSafe } from "../terminal-text.js";

/** How long an approval question waits for an answer; no answer is a no. */
const APPROVAL_TIMEOUT_MS = 5 * 60 * 1000;

/**
 * The terminal prompt as an approval broker (`runner exec`, `runner agency
 * run|resume`); without a terminal on both ends, none (the policy's
 * `confirmations` decides).
 */
export function terminalApprovals(): { approvals?: ApprovalBroker } {
  if (!process.stdin.isTTY || !process.stderr.isTTY) return {};
  return {
    approvals: {
      request: ({ question, canRemember }, signal) =>
        promptForApproval({
          input: process.stdin,
          output: process.stderr,
          question: terminalSafe(question),
          canRemember,
          timeoutMs: APPROVAL_TIMEOUT_MS,
          signal,
        }),
    },
  };
}
