import { currentOwner } from "../../process/process-owner.js";

/** Docker labels that mark every resource a run creates, so a later start can find and sweep leftovers. */
export const LABEL_RUN_ID = "dev.agent-runner.run-id";
/** `<hostname>:<pid>:<process start time in clock ticks>` of the runner process that owns the resource. */
export const LABEL_OWNER = "dev.agent-runner.owner";
const LABEL_AGENT_ID = "dev.agent-runner.agent-id";

/** The labels every container and network of a sandbox carries. */
export function resourceLabels(spec: { runId: string; agentId: string }): Record<string, string> {
  return { [LABEL_RUN_ID]: spec.runId, [LABEL_AGENT_ID]: spec.agentId, [LABEL_OWNER]: currentOwner() };
}

/**
 * Create options of a container driven through its attached stdin/stdout:
 * stdin closes when the runner's attach connection drops (StdinOnce), so the
 * process inside sees EOF and the container ends itself.
 */
export const ATTACHED_STDIO = {
  AttachStdin: true,
  AttachStdout: true,
  AttachStderr: true,
  OpenStdin: true,
  StdinOnce: true,
  Tty: false,
} as const;
