import { Semaphore } from "async-mutex";
import { z } from "zod";
import { CancelledError, errorMessage } from "../errors.js";
import type { EventSink } from "../events/run-events.js";
import { defineTool, toolError, type Tool } from "../tools/define-tool.js";
import { pageLines } from "../tools/page-lines.js";

export type TaskStatus = "pending" | "running" | "completed" | "failed" | "cancelled";
export type TaskKind = "agent" | "shell";

/** A unit of work that may run in the background: a subagent or a background `run_shell`. */
export interface TaskRecord {
  id: string;
  kind: TaskKind;
  description: string;
  background: boolean;
  status: TaskStatus;
  /** ms since the epoch. */
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  /** The subagent's id (`w1`, `e2`), for agent tasks. */
  agent_id: string | null;
  /** What the task produced: the subagent's outcome text or the command's result; empty while it runs. */
  output: string;
}

/** What a task body returns. */
export interface TaskResult {
  status: "completed" | "failed";
  output: string;
}

interface Entry {
  record: TaskRecord;
  controller: AbortController;
  done: Promise<TaskRecord>;
}

/**
 * The run's task table: every subagent and background command with its
 * lifecycle pending → running → completed | failed | cancelled. Subagent
 * tasks wait for one of `maxParallel` slots. A background task's end is
 * queued as a notification the agent loop delivers before its next model
 * call. `stopAll()` cancels everything (end of the run).
 */
export class TaskManager {
  private readonly tasks = new Map<string, Entry>();
  private readonly slots: Semaphore;
  private readonly notifications: string[] = [];
  private counter = 0;

  constructor(
    private readonly events: EventSink,
    /** Subagents that may run at once. */
    readonly maxParallel: number,
  ) {
    this.slots = new Semaphore(maxParallel);
  }

  /**
   * Starts a task. `body` gets a signal aborted by `stop()`, by `stopAll()`
   * or by `parentSignal`; it returns the output, or throws (failed; cancelled
   * when the signal aborted). Resolves `done` when the task has ended.
   */
  start(
    options: { kind: TaskKind; description: string; background: boolean; agentId?: string; parentSignal: AbortSignal },
    /** `releaseSlot` gives back an agent task's `maxParallel` slot early (before waiting on something else); idempotent. */
    body: (signal: AbortSignal, record: TaskRecord, releaseSlot: () => void) => Promise<TaskResult>,
  ): { record: TaskRecord; done: Promise<TaskRecord> } {
    this.counter += 1;
    const record: TaskRecord = {
      id: `t${this.counter}`,
      kind: options.kind,
      description: options.description,
      background: options.background,
      status: "pending",
      created_at: Date.now(),
      started_at: null,
      ended_at: null,
      agent_id: options.agentId ?? null,
      output: "",
    };
    const controller = new AbortController();
    const signal = AbortSignal.any([controller.signal, options.parentSignal]);
    const run = async (): Promise<TaskRecord> => {
      let release: (() => void) | null = null;
      const releaseSlot = () => {
        release?.();
        release = null;
      };
      try {
        if (options.kind === "agent") release = await this.acquire(signal);
        if (signal.aborted) throw new CancelledError();
        record.status = "running";
        record.started_at = Date.now();
        this.events.emit({
          type: "task.started",
          data: { task_id: record.id, kind: record.kind, description: record.description, background: record.background, agent_id: record.agent_id },
        });
        const result = await body(signal, record, releaseSlot);
        record.status = signal.aborted ? "cancelled" : result.status;
        record.output = result.output;
      } catch (error) {
        record.status = signal.aborted || error instanceof CancelledError ? "cancelled" : "failed";
        record.output ||= record.status === "cancelled" ? "stopped before it finished" : `Error: ${errorMessage(error)}`;
      } finally {
        releaseSlot();
        record.ended_at = Date.now();
        this.events.emit({
          type: "task.finished",
          data: {
            task_id: record.id,
            kind: record.kind,
            status: record.status,
            duration_ms: record.ended_at - (record.started_at ?? record.created_at),
            agent_id: record.agent_id,
          },
        });
        if (record.background)
          this.notifications.push(`[background task ${record.id} (${record.kind}: ${record.description}) ${record.status}]\n${record.output}`);
      }
      return record;
    };
    const done = run();
    this.tasks.set(record.id, { record, controller, done });
    return { record, done };
  }

  private async acquire(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) throw new CancelledError();
    const acquisition = this.slots.acquire();
    const aborted = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(new CancelledError()), { once: true }));
    try {
      const [, release] = await Promise.race([acquisition, aborted]);
      return release;
    } catch (error) {
      // A stopped waiter must not keep the slot it would have been granted later.
      void acquisition.then(([, release]) => release());
      throw error;
    }
  }

  get(id: string): TaskRecord | null {
    return this.tasks.get(id)?.record ?? null;
  }

  list(): TaskRecord[] {
    return [...this.tasks.values()].map((entry) => entry.record);
  }

  /** Stops a task (its subagent's loop and container, or its process tree) and waits until it has ended; false when unknown. */
  async stop(id: string): Promise<TaskRecord | null> {
    const entry = this.tasks.get(id);
    if (!entry) return null;
    entry.controller.abort();
    return entry.done;
  }

  /** Cancels every task and waits for all of them to end. */
  async stopAll(): Promise<void> {
    for (const entry of this.tasks.values()) entry.controller.abort();
    await Promise.allSettled([...this.tasks.values()].map((entry) => entry.done));
  }

  /** Messages about background tasks that ended since the last call (delivered to the agent before its next model call). */
  drainNotifications(): string[] {
    return this.notifications.splice(0);
  }

  /** True while a background task has not ended. */
  hasRunningBackground(): boolean {
    return [...this.tasks.values()].some((entry) => entry.record.background && entry.record.ended_at === null);
  }

  /** Waits until at least one running background task ends (resolves at once when none runs). */
  async waitForBackground(): Promise<void> {
    const running = [...this.tasks.values()].filter((entry) => entry.record.background && entry.record.ended_at === null);
    if (running.length) await Promise.race(running.map((entry) => entry.done));
  }
}

/** Lines per page of `task_output`, and its most characters (a page stays one ordinary tool result). */
const OUTPUT_PAGE_LINES = 400;
const OUTPUT_PAGE_CHARACTERS = 40_000;

const taskId = z.string().min(1).describe("The task id (t1, t2, ...)");

/** The task tools' arguments, by tool name (also what src/runner/check-script.ts checks a script's calls against). */
export const taskToolInputs = {
  task_list: z.strictObject({}),
  task_get: z.strictObject({ task_id: taskId }),
  task_output: z.strictObject({
    task_id: taskId,
    offset: z.number().int().min(1).optional().describe("First line, 1-based (default 1)"),
    limit: z.number().int().min(1).optional().describe(`Lines (default ${OUTPUT_PAGE_LINES})`),
  }),
  task_stop: z.strictObject({ task_id: taskId }),
};

/** `task_list`, `task_get`, `task_output`, `task_stop` over a run's {@link TaskManager}. */
export function taskTools(tasks: TaskManager): Tool[] {
  const describe = (record: TaskRecord) =>
    [
      `${record.id}  ${record.kind}  ${record.status}${record.background ? "  background" : ""}${record.agent_id ? `  agent ${record.agent_id}` : ""}`,
      `  ${record.description}`,
      `  started ${record.started_at ? new Date(record.started_at).toISOString() : "-"}, ended ${record.ended_at ? new Date(record.ended_at).toISOString() : "-"}`,
    ].join("\n");
  return [
    defineTool({
      name: "task_list",
      readOnly: true,
      description: "List this run's tasks (subagents and background commands) with their status.",
      input: taskToolInputs.task_list,
      async execute() {
        const all = tasks.list();
        return { content: all.length ? all.map(describe).join("\n") : "no tasks yet" };
      },
    }),
    defineTool({
      name: "task_get",
      readOnly: true,
      description: "Show one task's state: kind, status, times, and its output size.",
      input: taskToolInputs.task_get,
      async execute(input) {
        const record = tasks.get(input.task_id);
        if (!record) return toolError(`no task ${input.task_id}; task_list shows them`);
        return { content: `${describe(record)}\n  output: ${record.ended_at === null ? "(available when it ends)" : `${record.output.length} characters`}` };
      },
    }),
    defineTool({
      name: "task_output",
      readOnly: true,
      description: "Read a finished task's output in pages of lines.",
      input: taskToolInputs.task_output,
      async execute(input) {
        const record = tasks.get(input.task_id);
        if (!record) return toolError(`no task ${input.task_id}; task_list shows them`);
        if (record.ended_at === null) return { content: `task ${record.id} is ${record.status}; its output is available when it ends` };
        const page = pageLines(record.output, input.offset ?? 1, input.limit ?? OUTPUT_PAGE_LINES, OUTPUT_PAGE_CHARACTERS);
        if ("error" in page) return toolError(`task ${record.id}: ${page.error}`);
        return { content: `[task ${record.id} ${record.status}: lines ${page.first}-${page.last} of ${page.total}]\n${page.text}` };
      },
    }),
    defineTool({
      name: "task_stop",
      readOnly: false,
      description: "Stop a running task: a subagent's loop and container, or a background command's whole process tree.",
      input: taskToolInputs.task_stop,
      async execute(input) {
        const record = tasks.get(input.task_id);
        if (!record) return toolError(`no task ${input.task_id}; task_list shows them`);
        if (record.ended_at !== null) return { content: `task ${record.id} had already ended: ${record.status}` };
        const ended = (await tasks.stop(input.task_id))!;
        return { content: `task ${ended.id} stopped: ${ended.status}` };
      },
    }),
  ];
}
