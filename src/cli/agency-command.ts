import { Command } from "commander";
import type { EventsFlags, RunFlags } from "./agency-actions.js";

// The definitions only: each action imports ./agency-actions.js (the Runner, the bus, the orchestrator) when it runs,
// so `runner --help` and the other quick commands do not load them (src/cli/main.ts).

const EXIT_CODES =
  "\nExit codes: 0 the goal event was published, 1 the agency went quiet without it, 2 bad input, 3 infrastructure, 130 interrupted (resumable).";

/** `runner agency run | resume | show | events | publish | init` (docs/agency.md). `signal` is the CLI's interrupt; `exit` receives the exit code. */
export function agencyCommand(signal: AbortSignal, exit: (code: number) => void): Command {
  // addCommand does not pass the program's settings on: usage errors must still reach main as CommanderError (exit 2).
  const agency = new Command("agency")
    .description("run a team of declarative agents that react to events, each invocation a sandboxed run (docs/agency.md)")
    .exitOverride();
  agency
    .command("run")
    .exitOverride()
    .description("start an agency: its start events, then every agent whose triggers match, until the goal event")
    .argument("<agency.yaml>", "the agency file (agents, workspace, context, start, goal)")
    .option("--event <type>", "publish this event too when the agency starts")
    .option("--subject <subject>", "the --event's subject")
    .option("--data <json>", "the --event's data, JSON")
    .option("--json", "print the agency's CloudEvents as JSON lines instead of the timeline, then {agency_id, status, report}")
    .addHelpText("after", EXIT_CODES)
    .action(async (file: string, flags: RunFlags) => {
      exit(await (await import("./agency-actions.js")).agencyRun(file, flags, signal));
    });
  agency
    .command("resume")
    .exitOverride()
    .description("continue an agency: unfinished invocations resume their runs, events not yet handled are delivered")
    .argument("<agency-id>", "the agency id (`agency <id>`, the first line `agency run` printed)")
    .option("--json", "print the agency's CloudEvents as JSON lines instead of the timeline, then {agency_id, status, report}")
    .addHelpText("after", EXIT_CODES)
    .action(async (id: string, flags: { json?: boolean }) => {
      exit(await (await import("./agency-actions.js")).agencyResume(id, flags, signal));
    });
  agency
    .command("show")
    .exitOverride()
    .description("draw an agency's trace (event → invocation → its model and tool calls → next event, with times, costs, guards) and its outcome")
    .argument("<agency-id>", "the agency id")
    .option("--json", "print agency-report.json (while it runs: the same shape, status running) with the trace tree as `trace`")
    .action(async (id: string, flags: { json?: boolean }) => {
      exit(await (await import("./agency-actions.js")).agencyShow(id, flags));
    });
  agency
    .command("events")
    .exitOverride()
    .description("print an agency's events from its log")
    .argument("<agency-id>", "the agency id")
    .option("-f, --follow", "keep printing new events as they come (until Ctrl-C)")
    .option("--from <n>", "start at this sequence number", "0")
    .option("--json", "one CloudEvents JSON object a line")
    .action(async (id: string, flags: EventsFlags) => {
      exit(await (await import("./agency-actions.js")).agencyEvents(id, flags, signal));
    });
  agency
    .command("publish")
    .exitOverride()
    .description("publish an outside event into a running or idle agency (an idle one handles it on `agency resume`)")
    .argument("<agency-id>", "the agency id")
    .argument("<type>", "the event type, like coding.task.received")
    .option("--subject <subject>", "the event's subject")
    .option("--data <json>", "the event's data, JSON (at most 16 KiB)")
    .option("--id <id>", "the event's id: publishing the same id again is a no-op")
    .action(async (id: string, type: string, flags: { subject?: string; data?: string; id?: string }) => {
      exit(await (await import("./agency-actions.js")).agencyPublish(id, type, flags, signal));
    });
  agency
    .command("init")
    .exitOverride()
    .description("write agency.yaml and analyst, coder, tester and reviewer agents for the repository in dir (default .)")
    .argument("[dir]", "the repository", ".")
    .action(async (dir: string) => {
      exit((await import("./agency-init.js")).agencyInit(dir));
    });
  return agency;
}
