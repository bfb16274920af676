/**
 * The Docker-free run tier (docs/development.md "Testing"): a Runner whose sandboxes are
 * the run's real host directories (HostDirectorySandboxProvider), the
 * scripted model over loopback HTTP, real git. Commands are answered by the
 * test's handler; nothing the agent wrote runs on the host.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createRunner, type Runner } from "../../src/runner/runner.js";
import { cloudEventType, type RunEnvelope, type RunEventName } from "../../src/events/event-catalogue.js";
import {
  HostDirectorySandboxProvider,
  type HostDirectoryExecHandler,
  type HostDirectorySandboxOptions,
} from "../../src/sandbox/fake/host-directory-sandbox.js";
import { temporaryDirectory } from "./git-repository.js";

export { toolCall, writeScriptedTask } from "./runner-cli.js";

/**
 * The environment a fake-tier run gets: no host variable but PATH (for host
 * git), HOME inside the test's directory (no user skills), and the measured
 * disk limit, so a root runner makes no loop mount.
 */
export function fakeTierEnvironment(home: string): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: home, RUNNER_DISK_ENFORCEMENT: "monitor" };
}

/** A Runner over a fresh RUNNER_HOME and a recording host-directory provider; `await using` closes it and removes the home. */
export async function fakeRunner(options: HostDirectorySandboxOptions = {}) {
  const home = temporaryDirectory("agent-runner-fake-home-");
  const provider = new HostDirectorySandboxProvider(options);
  const runner: Runner = await createRunner({ home: home.path, sandboxProvider: provider, environment: fakeTierEnvironment(home.path) });
  return {
    runner,
    provider,
    home: home.path,
    async [Symbol.asyncDispose]() {
      await runner.close();
      await home[Symbol.asyncDispose]();
    },
  };
}

/** The run's events.jsonl, parsed. */
export function eventsFile(runDirectory: string): RunEnvelope[] {
  return readFileSync(join(runDirectory, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RunEnvelope);
}

/** True when the envelope is an event of `type` (e.g. `verify.finished`) in the version this runner writes. */
export function isEvent(envelope: RunEnvelope, type: RunEventName): boolean {
  return envelope.type === cloudEventType(type);
}

/** The data of the events of `type`, in order. */
export function eventData(envelopes: RunEnvelope[], type: RunEventName): Record<string, unknown>[] {
  return envelopes.filter((envelope) => isEvent(envelope, type)).map((envelope) => envelope.data as Record<string, unknown>);
}

/** Resolves with the first event of `type` the run emits (replayed or live). */
export async function firstEvent(
  events: AsyncIterable<RunEnvelope>,
  type: RunEventName,
  match: (data: Record<string, unknown>) => boolean = () => true,
): Promise<Record<string, unknown>> {
  for await (const envelope of events) {
    if (isEvent(envelope, type) && match(envelope.data as Record<string, unknown>)) return envelope.data as Record<string, unknown>;
  }
  throw new Error(`the run ended without a ${type} event`);
}

/**
 * Points where a scripted agent waits for the test: the command `wait-for
 * <name>` returns once the test calls `open(name)` (or is killed).
 */
export class Gates {
  private readonly gates = new Map<string, { opened: Promise<void>; open: () => void }>();

  open(name: string): void {
    this.gate(name).open();
  }

  /** Resolves once `name` is open. */
  opened(name: string): Promise<void> {
    return this.gate(name).opened;
  }

  private gate(name: string) {
    let gate = this.gates.get(name);
    if (!gate) {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      gate = { opened, open };
      this.gates.set(name, gate);
    }
    return gate;
  }
}

/**
 * The few shell commands the fake tier's scripts use, answered in-process
 * on the sandbox's confined files (nothing runs on the host):
 * `echo <word> >> <file>` appends a line; `grep -q <word> <file>` exits 0
 * when the file contains the word, else 1; `wait-for <name>` waits for
 * `gates.open(name)`; `sleep <n>` waits until it is killed. Anything else
 * exits 127 (e.g. the skills loader's git: no workspace skills).
 */
export function fakeShell(gates: Gates = new Gates()): HostDirectoryExecHandler {
  return async ({ request, sandbox, signal }) => {
    const words = request.command.split(" ");
    if (words[0] === "echo" && words[2] === ">>" && words.length === 4) {
      const before = (await sandbox.readFile(words[3]!))?.content.toString() ?? "";
      await sandbox.writeFile(words[3]!, Buffer.from(`${before}${words[1]}\n`));
      return {};
    }
    if (words[0] === "grep" && words[1] === "-q" && words.length === 4) {
      const file = await sandbox.readFile(words[3]!);
      if (!file) return { exitCode: 2, stderr: `grep: ${words[3]}: No such file or directory\n` };
      return { exitCode: file.content.toString().includes(words[2]!) ? 0 : 1 };
    }
    if (words[0] === "wait-for" && words.length === 2) {
      await gates.opened(words[1]!);
      return { stdout: `${words[1]} opened\n` };
    }
    if (words[0] === "sleep" && words.length === 2) {
      return new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
    }
    return { exitCode: 127, stderr: `bash: ${words[0]}: command not found\n` };
  };
}
