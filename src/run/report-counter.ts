import { addUsage } from "../model/messages.js";
import type { EventSink } from "../events/run-events.js";
import type { RunReport } from "./run-report.js";

/** The main agent's id in events, journals and reports. */
export const MAIN_AGENT = "main";

/** Keeps the report's counters as events happen, so an interrupted or failed run still reports its work. */
export function reportCounter(report: RunReport): EventSink {
  let compared = 0;
  let stable = 0;
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
          break;
        }
        case "context.summary_usage":
          report.usage = addUsage(report.usage, event.data.usage);
          break;
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
