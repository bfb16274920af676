import type { ModelRequest } from "./model-client.js";

/** Headers the scripted model server reads, sent by every provider's client; harmless to real endpoints. */
export const CALL_INDEX_HEADER = "x-agent-runner-call-index";
export const AGENT_ID_HEADER = "x-agent-runner-agent-id";
/** A subagent's description, URI-encoded (headers are ASCII). */
export const DESCRIPTION_HEADER = "x-agent-runner-agent-description";
/** 0-based attempt number of this request within one `complete()` call (0 = first try, 1 = first retry, ...). */
export const ATTEMPT_HEADER = "x-agent-runner-attempt";
/** `turn` or `compaction` ({@link ModelRequest.purpose}). */
export const PURPOSE_HEADER = "x-agent-runner-purpose";

/** The headers above for attempt `attempt` of `request`. */
export function runnerHeaders(request: ModelRequest, attempt: number): Record<string, string> {
  return {
    [CALL_INDEX_HEADER]: String(request.callIndex),
    [AGENT_ID_HEADER]: request.agentId,
    [ATTEMPT_HEADER]: String(attempt),
    [PURPOSE_HEADER]: request.purpose ?? "turn",
    ...(request.agentDescription === undefined ? {} : { [DESCRIPTION_HEADER]: encodeURIComponent(request.agentDescription) }),
  };
}
