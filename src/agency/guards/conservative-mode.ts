import type { AgencyDefinition, AgentDefinition } from "../load-agency.js";

/**
 * The tools `mode: conservative` takes from every agent, whatever its
 * capabilities say (issue 22 item 6): the file writers, the shell, and
 * subagents with their background-task tools. What is left reads.
 */
export const CONSERVATIVE_DENIED_TOOLS: readonly string[] = ["write_file", "edit_file", "run_shell", "agent", "task_*"];

/** The tools an agent may use in the agency's mode: its capabilities, less {@link CONSERVATIVE_DENIED_TOOLS} in conservative mode. */
export function capabilitiesInMode(agent: Pick<AgentDefinition, "capabilities">, mode: AgencyDefinition["mode"]): string[] {
  return mode === "conservative" ? agent.capabilities.filter((tool) => !CONSERVATIVE_DENIED_TOOLS.includes(tool)) : agent.capabilities;
}
