import { terminalSafe } from "../../terminal-text.js";
import type { TraceNode } from "./agency-trace.js";

/** The mark that starts each kind's line: a marker (a guard fired, a merge conflicted) stands out with `!!`. */
const MARKS: Record<TraceNode["kind"], string> = {
  workflow: "agency",
  event: "event",
  marker: "!!",
  invocation: "invoke",
  chat: "chat",
  tool: "tool",
};

/**
 * The trace tree as terminal lines (`runner agency show`): one line a node,
 * drawn with box characters, each with its start as an offset from the
 * agency's start, its duration, its cost and its outcome. Every name, detail
 * and subject goes through terminalSafe (an agent chooses them).
 */
export function traceText(root: TraceNode): string {
  const lines: string[] = [];
  const origin = root.startMs;
  const walk = (node: TraceNode, prefix: string, childPrefix: string): void => {
    lines.push(terminalSafe(`${prefix}${lineOf(node, origin)}`));
    node.children.forEach((child, index) => {
      const last = index === node.children.length - 1;
      walk(child, `${childPrefix}${last ? "└─ " : "├─ "}`, `${childPrefix}${last ? "   " : "│  "}`);
    });
  };
  walk(root, "", "");
  return `${lines.join("\n")}\n`;
}

function lineOf(node: TraceNode, origin: number): string {
  const parts = [MARKS[node.kind], node.name];
  if (node.kind === "event" || node.kind === "marker") {
    parts.push(`#${String(node.attributes["event.sequence"])}`);
    if (node.kind === "event" && node.detail) parts.push(`[${node.detail}]`);
    parts.push(`+${seconds(node.startMs - origin)}`);
    if (node.kind === "marker" && node.detail) parts.push(node.detail);
    return parts.join(" ");
  }
  if (node.kind === "chat") parts.push(`step ${String(node.attributes.step)}`);
  if (node.kind !== "workflow") parts.push(`+${seconds(node.startMs - origin)}`);
  parts.push(node.endMs === null ? "(running)" : seconds(node.endMs - node.startMs));
  if (node.costUsd !== null) parts.push(`$${node.costUsd.toFixed(4)}`);
  if (node.status) parts.push(node.status);
  if (node.kind === "invocation") parts.push(`run ${String(node.attributes["run.id"])}`);
  if (node.detail) parts.push(node.kind === "invocation" ? `(${node.detail})` : node.detail);
  return parts.join(" ");
}

/** A duration in ms as seconds with one decimal (`1.2s`). */
function seconds(ms: number): string {
  return `${(Math.max(0, ms) / 1000).toFixed(1)}s`;
}
