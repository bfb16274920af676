import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AgencyEvent } from "../bus/event-bus.js";
import { ConfigError } from "../errors.js";
import type { AgencyStop } from "./guards/chain-stops.js";
import type { ChainStop } from "./guards/stop-reasons.js";
import type { AgencyDefinition } from "./load-agency.js";

/** What agency.json holds: the agency as it was started (resume uses this, not the files as they are now). */
export interface AgencyRecord {
  agency_id: string;
  trace_id: string;
  /** `agency/<agency-id>`. */
  branch: string;
  created_at: string;
  definition: AgencyDefinition;
}

/** One line of invocations.jsonl: an invocation started (with its run) or finished. */
export type InvocationLine =
  | {
      kind: "started";
      invocation_id: string;
      agent: string;
      event_id: string;
      event_type: string;
      sequence: number;
      run_id: string;
      /** The `runner worker` (`host:pid`) that took it, for an agency on workers (docs/scale-out.md); absent: the orchestrator's process. */
      worker?: string;
      time: string;
    }
  | {
      kind: "finished";
      invocation_id: string;
      /** The run that ended it, when not the started one (a remote invocation redelivered to another worker). */
      run_id?: string;
      /** The worker of that run; absent or null: the orchestrator's process. */
      worker?: string | null;
      status: string;
      reason: string | null;
      cost_usd: number | null;
      duration_ms: number;
      commit: string | null;
      merged: boolean | null;
      /** The agent's structured output (its `output_schema`); absent in lines written before it existed. */
      output?: Record<string, unknown> | null;
      time: string;
    };

/** An invocation as the fold of its lines. */
export interface InvocationRecord {
  invocation_id: string;
  agent: string;
  event_id: string;
  event_type: string;
  sequence: number;
  run_id: string;
  /** The `runner worker` (`host:pid`) whose run it is; null for a run in the orchestrator's process. */
  worker: string | null;
  /** `running` until its finished line; then the run's status. */
  status: string;
  reason: string | null;
  cost_usd: number | null;
  duration_ms: number | null;
  commit: string | null;
  merged: boolean | null;
  /** The validated object of an agent with `output_schema` (docs/agency.md "Structured output"), else null. */
  output: Record<string, unknown> | null;
}

/**
 * `$RUNNER_HOME/agencies/<id>/` (docs/agency.md "Records"): agency.json,
 * the bus (bus.jsonl, consumers.jsonl), invocations.jsonl (one line
 * per start and end, appended, so a crash loses at most the line being
 * written), the generated per-agent policies, agency-report.json.
 */
export class AgencyDirectory {
  private constructor(readonly path: string) {}

  static of(home: string, agencyId: string): AgencyDirectory {
    return new AgencyDirectory(join(home, "agencies", agencyId));
  }

  /** The directory of an existing agency; ConfigError (exit 2) naming the fix when there is none. */
  static existing(home: string, agencyId: string): AgencyDirectory {
    const root = join(home, "agencies");
    const directory = AgencyDirectory.of(home, agencyId);
    if (!/^[\w.-]+$/.test(agencyId) || !existsSync(join(directory.path, "agency.json"))) {
      const known = existsSync(root) ? readdirSync(root).slice(-5) : [];
      throw new ConfigError(`no agency ${agencyId} in ${root}${known.length ? ` (recent: ${known.join(", ")})` : ""}`);
    }
    return directory;
  }

  /** The bus's files (bus.jsonl, consumers.jsonl, bus.lock) live in the agency's directory itself. */
  get busDirectory(): string {
    return this.path;
  }

  get reportFile(): string {
    return join(this.path, "agency-report.json");
  }

  policyFile(agent: string): string {
    return join(this.path, "policies", `${agent}.yaml`);
  }

  create(record: AgencyRecord): void {
    mkdirSync(join(this.path, "policies"), { recursive: true, mode: 0o700 });
    this.writeJson("agency.json", record);
  }

  readRecord(): AgencyRecord {
    return JSON.parse(readFileSync(join(this.path, "agency.json"), "utf8")) as AgencyRecord;
  }

  appendInvocation(line: InvocationLine): void {
    appendFileSync(join(this.path, "invocations.jsonl"), `${JSON.stringify(line)}\n`);
  }

  /** Every invocation so far, in start order; a torn last line (a crash mid-write) is ignored. */
  readInvocations(): Map<string, InvocationRecord> {
    const file = join(this.path, "invocations.jsonl");
    const records = new Map<string, InvocationRecord>();
    if (!existsSync(file)) return records;
    for (const text of readFileSync(file, "utf8").split("\n")) {
      let line: InvocationLine;
      try {
        line = JSON.parse(text) as InvocationLine;
      } catch {
        continue;
      }
      if (line.kind === "started") {
        records.set(line.invocation_id, {
          invocation_id: line.invocation_id,
          agent: line.agent,
          event_id: line.event_id,
          event_type: line.event_type,
          sequence: line.sequence,
          run_id: line.run_id,
          worker: line.worker ?? null,
          status: "running",
          reason: null,
          cost_usd: null,
          duration_ms: null,
          commit: null,
          merged: null,
          output: null,
        });
      } else {
        const record = records.get(line.invocation_id);
        if (record)
          Object.assign(record, {
            ...(line.run_id === undefined ? {} : { run_id: line.run_id }),
            ...(line.worker === undefined ? {} : { worker: line.worker }),
            status: line.status,
            reason: line.reason,
            cost_usd: line.cost_usd,
            duration_ms: line.duration_ms,
            commit: line.commit,
            merged: line.merged,
            output: line.output ?? null,
          });
      }
    }
    return records;
  }

  /**
   * Appends `event` to invocation `invocationId`'s outbox (outbox/<id>.jsonl):
   * what its agent emitted, published by the orchestrator when the invocation
   * ends with its work landed. An id already there is not added again. Resolves with the outbox's size.
   */
  async addToOutbox(invocationId: string, event: AgencyEvent): Promise<number> {
    const queued = this.outbox(invocationId);
    if (!queued.some((earlier) => earlier.id === event.id)) {
      mkdirSync(join(this.path, "outbox"), { recursive: true, mode: 0o700 });
      appendFileSync(join(this.path, "outbox", `${invocationId}.jsonl`), `${JSON.stringify(event)}\n`);
      queued.push(event);
    }
    return queued.length;
  }

  /** The events invocation `invocationId` emitted so far, in order (a torn last line is not one). */
  outbox(invocationId: string): AgencyEvent[] {
    const file = join(this.path, "outbox", `${invocationId}.jsonl`);
    if (!existsSync(file)) return [];
    const lines = readFileSync(file, "utf8").split("\n");
    lines.pop();
    return lines.map((line) => JSON.parse(line) as AgencyEvent);
  }

  /** Writes `name` whole (a temporary file renamed over it), so a reader never sees half of it. */
  writeJson(name: string, value: unknown): void {
    const target = join(this.path, name);
    writeFileSync(`${target}.tmp`, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
    renameSync(`${target}.tmp`, target);
  }

  readReport(): AgencyReport | null {
    return existsSync(this.reportFile) ? (JSON.parse(readFileSync(this.reportFile, "utf8")) as AgencyReport) : null;
  }
}

/** How an agency run ended. */
export type AgencyStatus = "succeeded" | "failed" | "error" | "cancelled";

/** agency-report.json (docs/agency.md "Records"). */
export interface AgencyReport {
  agency_id: string;
  name: string;
  /** `succeeded` (goal reached, exit 0), `failed` (quiescent without it, 1), `error` (infrastructure, 3), `cancelled` (130, resumable). */
  status: AgencyStatus;
  /** `goal_reached`, `quiescent`, `cancelled`, `budget_exhausted`, the first stopped chain's reason (`max_hops`, ...), or what failed. */
  reason: string;
  goal: string;
  branch: string;
  /** The agency branch's head when the run ended. */
  head_commit: string | null;
  /** Events in the log. */
  events: number;
  duration_ms: number;
  /** agency.yaml `mode`: `conservative` when every agent ran read-only (docs/agency.md "Hops, mode and budget"). */
  mode: AgencyDefinition["mode"];
  /** agency.yaml `max_hops`: the longest chain of agent hand-offs delivered. */
  max_hops: number;
  /** agency.yaml `budget.max_cost_usd` and what the invocations spent, USD; null without a budget. */
  budget: { max_cost_usd: number; spent_usd: number } | null;
  /** Why the agency did not succeed, as one of the named classes (docs/agency.md "Why a chain stopped"); null when it succeeded. */
  stop: AgencyStop | null;
  /** Every chain that stopped, in log order (the data of its `agency.chain.stopped` event). */
  stops: ChainStop[];
  invocations: {
    invocation_id: string;
    agent: string;
    event_id: string;
    event_type: string;
    run_id: string;
    /** The `runner worker` that ran it (an agency on workers), else null. */
    worker: string | null;
    status: string;
    reason: string | null;
    cost_usd: number | null;
    duration_ms: number | null;
    commit: string | null;
    merged: boolean | null;
    /** The agent's structured output when it has `output_schema` and gave a valid one, else null. */
    output: Record<string, unknown> | null;
  }[];
}

/** The exit code of an agency's outcome (`runner agency run`): 0, 1, 3, 130. */
export function exitCodeOfAgency(status: AgencyStatus): number {
  return { succeeded: 0, failed: 1, error: 3, cancelled: 130 }[status];
}
