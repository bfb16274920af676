/** Docker labels that mark every resource a run creates, so a later start can find and sweep leftovers. */
export const LABEL_RUN_ID = "dev.agent-runner.run-id";
/** `<hostname>:<pid>:<process start time in clock ticks>` of the runner process that owns the resource. */
export const LABEL_OWNER = "dev.agent-runner.owner";
export const LABEL_AGENT_ID = "dev.agent-runner.agent-id";
