import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { ApprovalAnswer } from "../policy/approval.js";
import type { ApprovalInbox, PendingApproval } from "../runner/approval-inbox.js";

/** run_approve's decision as the policy's answer. */
export function answerOf(decision: "allow" | "allow_always" | "deny", reason: string | undefined): ApprovalAnswer {
  if (decision === "allow") return { answer: "yes" };
  if (decision === "allow_always") return { answer: "always" };
  return { answer: "no", ...(reason ? { reason } : {}) };
}

/**
 * Offers a new approval question to the client as a form elicitation when it
 * declared the capability. Only an accepted form answers it; decline, cancel,
 * a timeout or an error leave it waiting for run_approve (claude-code #41292:
 * some hosts decline elicitations without showing them).
 */
export function offerElicitation(server: McpServer, approvals: ApprovalInbox, approval: PendingApproval): void {
  if (!server.isConnected() || !server.server.getClientCapabilities()?.elicitation) return;
  const { request } = approval;
  server.server
    .elicitInput({
      mode: "form",
      message: `agent-runner run ${request.runId} asks: ${request.question}\n(${request.rule}: ${request.reason})`,
      requestedSchema: {
        type: "object",
        properties: {
          decision: {
            type: "string",
            title: "Decision",
            enum: request.canRemember ? ["allow", "allow_always", "deny"] : ["allow", "deny"],
          },
          reason: { type: "string", title: "Reason (for deny)" },
        },
        required: ["decision"],
      },
    })
    .then((result) => {
      const decision = result.content?.decision;
      if (result.action !== "accept" || (decision !== "allow" && decision !== "allow_always" && decision !== "deny")) return;
      const reason = typeof result.content?.reason === "string" && result.content.reason ? result.content.reason : undefined;
      approvals.answer(approval.id, answerOf(decision, reason));
    })
    .catch(() => undefined);
}
