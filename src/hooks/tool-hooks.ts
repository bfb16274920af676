import { spawn } from "node:child_process";
import picomatch from "picomatch";
import { z } from "zod";
import { ConfigError } from "../errors.js";
import type { EventSink } from "../events/run-events.js";
import { checkHostProgram, type HostProgramPlace, type HostProgramProblem } from "../process/host-program.js";
import type { GuardedCall, ToolResult } from "../tools/define-tool.js";

/** Exit code with which a pre-tool hook blocks the call (its stderr is the reason), as in Claude Code's hooks. */
const BLOCKING_EXIT_CODE = 2;
/** How long output may still arrive after a hook exits before its pipes are closed, ms. */
const OUTPUT_GRACE_MS = 200;
/** Output kept from a hook, per stream, bytes. */
const HOOK_OUTPUT_BYTES = 16 * 1024;

const hookSchema = z.strictObject({
  /**
   * The executable run on the host, the user's own trusted code: a path
   * (relative to the task file's directory) or a name on PATH. No shell:
   * shell text here is refused (see {@link checkHostProgram}).
   */
  command: z.string().min(1),
  /** Its arguments, passed as they are (no shell expands them). */
  args: z.array(z.string()).default([]),
  /** Tool-name globs the hook applies to (picomatch), default every tool. */
  tools: z.array(z.string().min(1)).default(["*"]),
  timeout_ms: z
    .number()
    .int()
    .positive()
    .max(10 * 60 * 1000)
    .default(30_000),
});

/** `hooks:` of a task or a policy. */
export const hooksSchema = z
  .strictObject({
    pre_tool_use: z.array(hookSchema).default([]),
    post_tool_use: z.array(hookSchema).default([]),
  })
  .default({ pre_tool_use: [], post_tool_use: [] });

export type Hooks = z.infer<typeof hooksSchema>;
type Hook = z.infer<typeof hookSchema>;

export interface HookRunOptions {
  /** Where hooks run: never the workspace (its files are the agent's). */
  cwd: string;
  /** The hooks' environment; its PATH finds a bare `command`. */
  env: NodeJS.ProcessEnv;
  /** Real paths of the trees the agent's work can change (the repository, RUNNER_HOME's runs): no hook may run from them. */
  agentTrees: readonly string[];
  events: EventSink;
  runId: string;
}

/** What a hook process did. */
interface HookOutcome {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  error: string | null;
}

/**
 * Every hook checked as a host program ({@link checkHostProgram}) at
 * `place`: the problems, each under `hooks.<phase>.<index>`; empty when all
 * may run.
 */
export function hookProblems(hooks: Hooks, place: HostProgramPlace): HostProgramProblem[] {
  return PHASES.flatMap((phase) => hooks[phase].flatMap((hook, index) => checkHostProgram({ field: `hooks.${phase}.${index}`, ...hook }, place).problems));
}

const PHASES = ["pre_tool_use", "post_tool_use"] as const;

/** The text of a hook in events and denials: its command and arguments. */
function describeHook(hook: Hook): string {
  return [hook.command, ...hook.args].join(" ");
}

/**
 * User hooks around tool calls (task `hooks:`). They run on the
 * host, as argv with no shell, with the call as JSON on stdin (`{run_id, agent_id, phase,
 * tool_name, tool_call_id, arguments[, result, is_error]}`), in `cwd` (the
 * task file's directory, never the workspace). A pre hook exiting 2 blocks
 * the call with its stderr as the reason; a post hook's stdout is appended to
 * the result as a note. A hook that fails otherwise or times out is reported
 * (`hook.failed` event) and the call goes on.
 */
export class ToolHooks {
  /** Each hook's executable, as checked (a real path, so no link is followed after the check). */
  private readonly executables = new Map<Hook, string>();

  /** Throws ConfigError (exit 2) listing every hook that may not run ({@link hookProblems}). */
  constructor(
    private readonly hooks: Hooks,
    private readonly options: HookRunOptions,
  ) {
    const place = { cwd: options.cwd, searchPath: options.env.PATH, agentTrees: options.agentTrees };
    const problems: HostProgramProblem[] = [];
    for (const phase of PHASES) {
      hooks[phase].forEach((hook, index) => {
        const checked = checkHostProgram({ field: `hooks.${phase}.${index}`, ...hook }, place);
        if (checked.executable === null) problems.push(...checked.problems);
        else this.executables.set(hook, checked.executable);
      });
    }
    if (problems.length > 0) {
      throw new ConfigError(`hooks refused:\n${problems.map((problem) => `  - ${problem.path}: ${problem.message}`).join("\n")}`);
    }
  }

  get isEmpty(): boolean {
    return this.hooks.pre_tool_use.length === 0 && this.hooks.post_tool_use.length === 0;
  }

  /** Runs the matching pre hooks in order; the first that exits 2 blocks the call. */
  async before(call: GuardedCall): Promise<{ allowed: true } | { allowed: false; reason: string }> {
    for (const hook of this.matching(this.hooks.pre_tool_use, call.name)) {
      const outcome = await this.run(hook, { phase: "pre_tool_use", ...this.payload(call) });
      if (outcome.exitCode === BLOCKING_EXIT_CODE) {
        this.report(hook, call, "pre_tool_use", outcome, "blocked");
        return { allowed: false, reason: `blocked by hook \`${describeHook(hook)}\`: ${outcome.stderr.trim() || "(no reason given)"}` };
      }
      this.report(hook, call, "pre_tool_use", outcome, outcome.exitCode === 0 ? "allowed" : "failed");
    }
    return { allowed: true };
  }

  /** Runs the matching post hooks; their stdout (exit 0) becomes a note on the result. */
  async after(call: GuardedCall, result: ToolResult): Promise<string | null> {
    const notes: string[] = [];
    for (const hook of this.matching(this.hooks.post_tool_use, call.name)) {
      const outcome = await this.run(hook, { phase: "post_tool_use", ...this.payload(call), result: result.content, is_error: result.isError ?? false });
      const ok = outcome.exitCode === 0;
      this.report(hook, call, "post_tool_use", outcome, ok ? "noted" : "failed");
      if (ok && outcome.stdout.trim()) notes.push(outcome.stdout.trim());
    }
    return notes.length ? notes.join("\n") : null;
  }

  private matching(hooks: Hook[], toolName: string): Hook[] {
    return hooks.filter((hook) => picomatch.isMatch(toolName, hook.tools));
  }

  private payload(call: GuardedCall) {
    return { run_id: this.options.runId, agent_id: call.agentId, tool_name: call.name, tool_call_id: call.toolCallId, arguments: call.arguments };
  }

  private report(
    hook: Hook,
    call: GuardedCall,
    phase: "pre_tool_use" | "post_tool_use",
    outcome: HookOutcome,
    result: "allowed" | "blocked" | "noted" | "failed",
  ): void {
    const data = {
      phase,
      command: describeHook(hook),
      tool_name: call.name,
      tool_call_id: call.toolCallId,
      exit_code: outcome.exitCode,
      timed_out: outcome.timedOut,
      outcome: result,
      ...(result === "failed"
        ? {
            error:
              outcome.error ?? (outcome.timedOut ? `timed out after ${hook.timeout_ms} ms` : `exit ${outcome.exitCode}: ${outcome.stderr.trim().slice(-500)}`),
          }
        : {}),
    };
    this.options.events.emit({ type: result === "failed" ? "hook.failed" : "hook.finished", data });
  }

  private run(hook: Hook, input: Record<string, unknown>): Promise<HookOutcome> {
    return new Promise((resolve) => {
      const child = spawn(this.executables.get(hook)!, hook.args, {
        argv0: hook.command,
        cwd: this.options.cwd,
        env: this.options.env,
        stdio: ["pipe", "pipe", "pipe"],
        detached: true,
      });
      const stdout: Buffer[] = [];
      const stderr: Buffer[] = [];
      const keep = (into: Buffer[]) => (chunk: Buffer) => {
        if (into.reduce((size, part) => size + part.length, 0) < HOOK_OUTPUT_BYTES) into.push(chunk);
      };
      child.stdout.on("data", keep(stdout));
      child.stderr.on("data", keep(stderr));
      const killGroup = () => {
        try {
          process.kill(-child.pid!, "SIGKILL");
        } catch {
          // already gone
        }
      };
      let timedOut = false;
      // The timeout is the hook's own: its whole process group goes when it passes.
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup();
      }, hook.timeout_ms);
      const text = (parts: Buffer[]) => Buffer.concat(parts).toString("utf8").slice(0, HOOK_OUTPUT_BYTES);
      let settled = false;
      const finish = (outcome: HookOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      child.on("error", (error) => finish({ exitCode: null, stdout: "", stderr: "", timedOut: false, error: error.message }));
      // The verdict is the hook's exit, not the end of its output: a child it left behind holding the
      // pipes must neither delay the call nor turn a block (exit 2) into a timeout. What the hook printed
      // has arrived by the time the pipes drain or shortly after its exit; leftovers are killed.
      child.on("exit", (code) => {
        const done = () => {
          killGroup();
          child.stdout.destroy();
          child.stderr.destroy();
          finish({ exitCode: timedOut ? null : code, stdout: text(stdout), stderr: text(stderr), timedOut, error: null });
        };
        if (child.stdout.readableEnded && child.stderr.readableEnded) done();
        else {
          const grace = setTimeout(done, OUTPUT_GRACE_MS);
          child.on("close", () => {
            clearTimeout(grace);
            done();
          });
        }
      });
      // A hook that does not read its stdin must not fail the write.
      child.stdin.on("error", () => undefined);
      child.stdin.end(JSON.stringify(input));
    });
  }
}
