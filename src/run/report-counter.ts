import { addUsage } from "../model/messages.js";
import { roundUsd } from "../model/pricing.js";
import type { EventSink } from "../events/run-events.js";
import type { RunReport } from "./run-report.js";

/** The main agent's id in events, journals and reports. */
export const MAIN_AGENT = "main";

/** Keeps the report's counters as events happen, so an interrupted or failed run still reports its work. */
export function reportCounter(report: RunReport): EventSink {
  let compared = 0;
  let stable = 0;
  // Summed unrounded; null for good once a call has no cost (an unpriced model, a line of an older runner).
  let cost: number | null = report.pricing.prices ? 0 : null;
  const agentCosts = new Map<string, number | null>();
  const addCost = (agentId: string, callCost: number | null | undefined) => {
    cost = cost === null || typeof callCost !== "number" ? null : cost + callCost;
    report.cost_usd = cost === null ? null : roundUsd(cost);
    const agent = report.agents.find((entry) => entry.id === agentId);
    if (!agent) return;
    const before = agentCosts.has(agentId) ? agentCosts.get(agentId)! : agent.cost_usd;
    const after = before === null || before === undefined || typeof callCost !== "number" ? null : before + callCost;
    agentCosts.set(agentId, after);
    agent.cost_usd = after === null ? null : roundUsd(after);
  };
  return {
    emit(event) {
      switch (event.type) {
        case "model_call.started":
          report.context.requests += 1;
          report.context.max_request_tokens = Math.max(report.context.max_request_tokens, event.data.estimated_tokens);
          if (event.data.prefix_stable !== null) {
            compared += 1;
            if (event.data.prefix_stable) stable += 1;
            report.prefix_stable_ratio = Math.round((stable / compared) * 1000) / 1000;
          }
          break;
        case "model_call.finished": {
          report.usage = addUsage(report.usage, event.data.usage);
          const agent = report.agents.find((entry) => entry.id === event.data.agent_id);
          if (agent) {
            agent.steps += 1;
            agent.usage = addUsage(agent.usage, event.data.usage);
          }
          if (event.data.agent_id === MAIN_AGENT) report.steps += 1;
          addCost(event.data.agent_id, event.data.cost_usd);
          break;
        }
        case "context.summary_usage": {
          report.usage = addUsage(report.usage, event.data.usage);
          // A subagent's compactions are its tokens too (not its steps).
          const agent = report.agents.find((entry) => entry.id === event.data.agent_id);
          if (agent) agent.usage = addUsage(agent.usage, event.data.usage);
          addCost(event.data.agent_id, event.data.cost_usd);
          break;
        }
        case "tool_call.finished":
        case "tool_call.interrupted": {
          const agent = report.agents.find((entry) => entry.id === event.data.agent_id);
          if (agent) agent.tool_calls += 1;
          if (event.data.agent_id === MAIN_AGENT) report.tool_calls += 1;
          break;
        }
        case "network.allowed":
        case "network.denied": {
          const counts = (report.network[`${event.data.host}:${event.data.port}`] ??= { allowed: 0, denied: 0 });
          if (event.type === "network.allowed") counts.allowed += 1;
          else counts.denied += 1;
          break;
        }
        case "context.cleared":
          report.context.cleared += event.data.cleared;
          break;
        case "context.compacted":
          report.context.compactions += 1;
          break;
        case "context.compaction_failed":
          report.context.compaction_failures += 1;
          break;
        case "context.repaired":
          report.context.repairs += 1;
          break;
      }
    },
  };
}
