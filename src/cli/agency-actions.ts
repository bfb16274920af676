import { join } from "node:path";
import { AgencyBus } from "../agency/agency-bus.js";
import { AgencyDirectory, exitCodeOfAgency, type AgencyReport } from "../agency/agency-directory.js";
import { agencyEvent } from "../agency/agency-event.js";
import { agencyRunning } from "../agency/agency-log.js";
import { checkOutsideEvent, type AgencyHandle, type OutsideEvent } from "../agency/agency.js";
import { createRunner } from "../worker/agency-runner.js";
import { readAgencyTrace } from "../agency/trace/agency-trace.js";
import { traceText } from "../agency/trace/trace-text.js";
import { checkAgencyEvent } from "../bus/agency-event.js";
import type { StoredEvent } from "../bus/event-bus.js";
import { CHAIN_STOPPED, ChainStops } from "../agency/guards/chain-stops.js";
import { ConfigError } from "../errors.js";
import { formatUsd, roundUsd } from "../model/pricing.js";
import { runnerHome } from "../runner/runner-home.js";
import { terminalSafe } from "../terminal-text.js";
import { terminalApprovals } from "./terminal-approvals.js";

export interface RunFlags {
  event?: string;
  subject?: string;
  data?: string;
  json?: boolean;
}

export interface EventsFlags {
  follow?: boolean;
  from: string;
  json?: boolean;
}

/** `runner agency run`: `agency <id>` first, the timeline (or --json events), the outcome; the exit code of the agency's status. */
export async function agencyRun(file: string, flags: RunFlags, signal: AbortSignal): Promise<number> {
  if ((flags.data !== undefined || flags.subject !== undefined) && flags.event === undefined)
    throw new ConfigError("--data and --subject describe an --event TYPE; give --event");
  const event: OutsideEvent | undefined = flags.event
    ? { type: flags.event, ...(flags.subject ? { subject: flags.subject } : {}), ...(flags.data !== undefined ? { data: parseData(flags.data) } : {}) }
    : undefined;
  if (event) checkOutsideEvent(event, "--event");
  const runner = await createRunner({ home: runnerHome() });
  try {
    const agency = await runner.agency(file, { signal, ...(event ? { event } : {}), ...terminalApprovals() });
    return await follow(agency, flags.json ?? false);
  } finally {
    await runner.close();
  }
}

/** `runner agency resume`. */
export async function agencyResume(id: string, flags: { json?: boolean }, signal: AbortSignal): Promise<number> {
  const runner = await createRunner({ home: runnerHome() });
  try {
    return await follow(await runner.resumeAgency(id, { signal, ...terminalApprovals() }), flags.json ?? false);
  } finally {
    await runner.close();
  }
}

async function follow(agency: AgencyHandle, json: boolean): Promise<number> {
  process.stdout.write(`agency ${agency.id}\n`);
  let sequence = 0;
  for await (const event of agency.events({ from: 0 })) {
    process.stdout.write(json ? `${JSON.stringify(event)}\n` : `${timelineLine({ sequence, event })}\n`);
    sequence += 1;
  }
  const report = await agency.result;
  if (json) {
    process.stdout.write(`${JSON.stringify({ agency_id: report.agency_id, status: report.status, report: join(agency.directory, "agency-report.json") })}\n`);
  } else {
    process.stdout.write(outcomeText(report));
  }
  return exitCodeOfAgency(report.status);
}

/** `runner agency show`. */
export async function agencyShow(id: string, flags: { json?: boolean }): Promise<number> {
  const directory = AgencyDirectory.existing(runnerHome(), id);
  const log: StoredEvent[] = [];
  for await (const stored of AgencyBus.of(directory).read()) log.push(stored);
  const report = snapshot(directory, log);
  const trace = await readAgencyTrace(directory, runnerHome());
  if (flags.json) {
    process.stdout.write(`${JSON.stringify({ ...report, trace }, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(`agency ${report.agency_id} (${report.name}): ${report.status}${report.reason ? ` (${report.reason})` : ""}\n\ntrace:\n`);
  process.stdout.write(traceText(trace));
  process.stdout.write(outcomeText(report));
  return 0;
}

/** `runner agency events`. */
export async function agencyEvents(id: string, flags: EventsFlags, signal: AbortSignal): Promise<number> {
  const directory = AgencyDirectory.existing(runnerHome(), id);
  const from = Number(flags.from);
  if (!Number.isInteger(from) || from < 0) throw new ConfigError(`--from: expected a sequence number (0 or more), got ${flags.from}`);
  for await (const stored of AgencyBus.of(directory).read({ from, follow: flags.follow ?? false, signal })) {
    process.stdout.write(flags.json ? `${JSON.stringify(stored.event)}\n` : `${timelineLine(stored)}\n`);
  }
  return 0;
}

/** `runner agency publish`: into the agency's bus (a file bus: straight into an idle agency's log, through a running one's inbox). */
export async function agencyPublish(id: string, type: string, flags: { subject?: string; data?: string; id?: string }, signal: AbortSignal): Promise<number> {
  const directory = AgencyDirectory.existing(runnerHome(), id);
  const outside: OutsideEvent = {
    type,
    ...(flags.subject ? { subject: flags.subject } : {}),
    ...(flags.data !== undefined ? { data: parseData(flags.data) } : {}),
    ...(flags.id ? { id: flags.id } : {}),
  };
  checkOutsideEvent(outside, "type");
  const record = directory.readRecord();
  const event = agencyEvent({ agencyId: record.agency_id, traceId: record.trace_id }, { kind: "outside" }, outside);
  try {
    checkAgencyEvent(event);
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  const running = agencyRunning(directory.path);
  const sequence = await AgencyBus.of(directory, record).publish(event, { signal });
  process.stdout.write(
    `published ${type} (${event.id}) at sequence ${sequence}${running ? "" : `; the agency is not running: \`runner agency resume ${id}\` handles it`}\n`,
  );
  return 0;
}

function parseData(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`--data: expected JSON, like '{"issue": "add() is wrong"}' (${(error as Error).message})`);
  }
}

/** agency-report.json, or while the agency has none yet (running, or killed) the same shape from its records and `log`, status `running`. */
function snapshot(directory: AgencyDirectory, log: StoredEvent[]): AgencyReport | (Omit<AgencyReport, "status"> & { status: "running" }) {
  const report = directory.readReport();
  if (report && !agencyRunning(directory.path)) return report;
  const record = directory.readRecord();
  const { definition } = record;
  const invocations = [...directory.readInvocations().values()];
  const stops = new ChainStops();
  for (const stored of log) stops.observe(stored.event);
  const spent = invocations.reduce((sum, invocation) => sum + (invocation.cost_usd ?? 0), 0);
  return {
    agency_id: record.agency_id,
    name: record.definition.name,
    status: "running",
    reason: agencyRunning(directory.path) ? "" : "not running: interrupted or killed; `runner agency resume` continues it",
    goal: record.definition.goal,
    branch: record.branch,
    head_commit: null,
    events: log.length,
    duration_ms: 0,
    mode: definition.mode,
    max_hops: definition.max_hops,
    budget: definition.budget ? { max_cost_usd: definition.budget.max_cost_usd, spent_usd: roundUsd(spent) } : null,
    stop: null,
    stops: stops.all,
    invocations,
  };
}

/** One event of the timeline: sequence, time, who, type, subject, and the data that says what happened. */
function timelineLine(stored: StoredEvent): string {
  const { event } = stored;
  const who = event.source.split("/").at(-1)!;
  const time = event.time.slice(11, 19);
  const data = event.data as Record<string, unknown> | undefined;
  let detail = "";
  if (event.type === "agency.agent.state" && data) detail = `${String(data.agent)}: ${String(data.previous ?? "-")} → ${String(data.state)}`;
  else if (event.type === "agency.invocation.finished" && data)
    detail = `${String(data.agent)} ${String(data.status)} (${String(data.reason)}) run ${String(data.run_id)}${data.merged === true ? " merged" : data.merged === false ? " NOT merged" : ""}${data.output ? ` output ${JSON.stringify(data.output).slice(0, 120)}` : ""}`;
  else if (event.type === CHAIN_STOPPED && data) detail = `${String(data.class)} (${String(data.reason)}) at hop ${String(data.hops)}: ${String(data.detail)}`;
  else if (event.type.startsWith("agency.approval.") && data)
    detail = `${String(data.agent)} ${String(data.tool)}${data.answer === undefined ? `: ${String(data.question)}` : ` → ${String(data.answer)} (${data.asked === false ? "nobody to ask: the policy refused" : "asked"})`}`;
  else if (data !== undefined) detail = JSON.stringify(data).slice(0, 120);
  return terminalSafe(`#${stored.sequence} ${time} ${who.padEnd(12)} ${event.type}${event.subject ? ` [${event.subject}]` : ""}${detail ? `  ${detail}` : ""}`);
}

/** The summary after the timeline. A report written before the guards existed has no `mode`, `max_hops`, `stop` or `stops`. */
function outcomeText(
  report: Omit<AgencyReport, "status" | "mode" | "max_hops" | "budget" | "stop" | "stops"> & { status: string } & Partial<
      Pick<AgencyReport, "mode" | "max_hops" | "budget" | "stop" | "stops">
    >,
): string {
  const lines = ["", "invocations:"];
  for (const invocation of report.invocations) {
    lines.push(
      `  ${invocation.agent.padEnd(12)} ${invocation.event_type.padEnd(32)} ${invocation.status.padEnd(9)} ${invocation.reason ?? ""}  run ${invocation.run_id}${invocation.worker ? ` on ${invocation.worker}` : ""}${invocation.duration_ms === null ? "" : ` ${(invocation.duration_ms / 1000).toFixed(1)}s`}`,
    );
    // Reports written before structured output lack the field.
    if (invocation.output) lines.push(`    output ${JSON.stringify(invocation.output).slice(0, 200)}`);
  }
  if (report.invocations.length === 0) lines.push("  (none)");
  const settings = [
    `mode ${report.mode ?? "normal"}`,
    `max_hops ${report.max_hops ?? 8}`,
    ...(report.budget ? [`budget ${formatUsd(report.budget.spent_usd)} spent of ${formatUsd(report.budget.max_cost_usd)}`] : []),
  ];
  lines.push("", settings.join(" · "));
  if (report.stops?.length) {
    lines.push("", "stopped chains:");
    for (const stop of report.stops) lines.push(`  ${stop.class} (${stop.reason}) at hop ${stop.hops} after ${stop.last_event.type}: ${stop.detail}`);
  }
  if (report.stop) lines.push("", `why: ${report.stop.class}: ${report.stop.means}`, `  what to do: ${report.stop.fix.replaceAll("<id>", report.agency_id)}`);
  lines.push(
    "",
    `${report.status}${report.reason ? ` (${report.reason})` : ""}: work on ${report.branch}${report.head_commit ? ` at ${report.head_commit.slice(0, 12)}` : ""}`,
  );
  lines.push(`  runner agency show ${report.agency_id}    git diff HEAD...${report.branch}`, "");
  return terminalSafe(lines.join("\n")) + "\n";
}
