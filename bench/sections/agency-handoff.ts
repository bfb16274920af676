/**
 * The agency's hand-off overhead (issue 21): from an event published on the
 * bus to the first model request of the invocation it triggers, against a
 * plain `runner.start` of the same kind of task (start called → its first
 * model request). Goal: hand-off ≤ 1.2× a plain start.
 *
 * Both run in the Docker-free tier (HostDirectorySandboxProvider, real git,
 * an in-process model that answers at once), so what is measured is the
 * orchestrator and run start-up, not Docker. A `holder` agent keeps the
 * agency running (its invocation waits on a gate) while each round publishes
 * one `next` event and waits for the `second` agent's first model request.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createRunner } from "../../src/agency/agency.js";
import type { Task } from "../../src/config/load-task.js";
import type { ModelClient, ModelRequest, ModelResponse } from "../../src/model/model-client.js";
import { HostDirectorySandboxProvider } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { printTable, type Row } from "../lib/stats.js";

const USAGE = { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0 };

function answer(partial: Partial<ModelResponse>): ModelResponse {
  return { content: null, toolCalls: [], finishReason: partial.toolCalls?.length ? "tool_calls" : "stop", usage: USAGE, ...partial };
}

/** Writes a repository, two agents and a holder; returns agency.yaml. */
function writeAgency(root: string): string {
  const repo = join(root, "repo");
  mkdirSync(repo, { recursive: true });
  writeFileSync(join(repo, "README.md"), "bench\n");
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=b", "-c", "user.email=b@localhost", ...args], { cwd: repo });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-qm", "initial");
  mkdirSync(join(root, "agents"));
  writeFileSync(join(root, "script.yaml"), JSON.stringify({ turns: [] }));
  const agent = (name: string, trigger: string, capabilities: string[]) =>
    writeFileSync(
      join(root, "agents", `${name}.yaml`),
      JSON.stringify({
        agent: {
          name,
          description: `the ${name}`,
          model: { provider: "scripted", script: "../script.yaml" },
          instructions: "bench",
          triggers: [{ event: trigger }],
          capabilities: capabilities.map((tool) => ({ tool })),
        },
      }),
    );
  agent("holder", "bench.hold", ["run_shell"]);
  agent("second", "bench.next", ["read_file"]);
  const file = join(root, "agency.yaml");
  writeFileSync(file, JSON.stringify({ name: "bench", workspace: "./repo", goal: "bench.never", start: [{ type: "bench.hold" }] }));
  return file;
}

/** Runs the hand-off section: `rounds` samples of each, after one warm-up. */
export async function benchHandoff(rounds: number): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "agency-handoff-"));
  const home = join(root, "home");
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  let firstRequest: (at: number) => void = () => undefined;
  const openModel = async (task: Task) => ({
    close: async () => undefined,
    client: {
      complete: async (request: ModelRequest): Promise<ModelResponse> => {
        if (task.name === "bench-holder") {
          return request.callIndex === 0
            ? answer({ toolCalls: [{ id: "hold", type: "function", function: { name: "run_shell", arguments: JSON.stringify({ command: "hold" }) } }] })
            : answer({ content: "released" });
        }
        if (request.callIndex === 0) firstRequest(performance.now());
        return answer({ content: "done" });
      },
    } satisfies ModelClient,
  });
  const provider = new HostDirectorySandboxProvider({
    exec: async ({ request }) => {
      if (request.command === "hold") await released;
      return { exitCode: 127, stderr: "" };
    },
  });
  const runner = await createRunner({
    home,
    sandboxProvider: provider,
    openModel,
    environment: { PATH: process.env.PATH, HOME: home, RUNNER_DISK_ENFORCEMENT: "monitor" },
  });
  try {
    const agencyFile = writeAgency(root);
    const agency = await runner.agency(agencyFile);
    // Each round waits for the invocation's end before the plain start, so the two never share the CPU.
    let finished = 0;
    let onFinished: () => void = () => undefined;
    void (async () => {
      for await (const event of agency.events({ from: 0 })) {
        if (event.type === "agency.invocation.finished" && event.subject === "second") {
          finished += 1;
          onFinished();
        }
      }
    })();
    const invocationsEnded = (count: number) =>
      new Promise<void>((resolve) => {
        onFinished = () => finished >= count && resolve();
        onFinished();
      });
    const handoff: number[] = [];
    const plain: number[] = [];
    const plainTask = {
      name: "bench-plain",
      instruction: "bench",
      workspace: join(root, "repo"),
      model: { provider: "scripted", script: join(root, "script.yaml") },
    };
    for (let round = -1; round < rounds; round += 1) {
      // Hand-off: publish, then the triggered invocation's first model request.
      let requested = new Promise<number>((resolve) => (firstRequest = resolve));
      const published = performance.now();
      await agency.publish({ type: "bench.next", id: `round-${round}` });
      const handoffMs = (await requested) - published;
      await invocationsEnded(round + 2);
      // Plain start of a task of the same kind.
      requested = new Promise<number>((resolve) => (firstRequest = resolve));
      const started = performance.now();
      const run = await runner.start(plainTask);
      const plainMs = (await requested) - started;
      await run.result;
      if (round < 0) continue;
      handoff.push(handoffMs);
      plain.push(plainMs);
    }
    release();
    const report = await agency.result;
    if (report.invocations.filter((invocation) => invocation.agent === "second").length !== rounds + 1) throw new Error("a hand-off was lost");
    const rows: Row[] = [
      { name: "plain runner.start → 1st model request", samples: plain },
      { name: "event published → 1st model request", samples: handoff, baseline: "plain runner.start → 1st model request" },
    ];
    printTable("agency hand-off (Docker-free tier), ms", rows);
    console.log("goal: hand-off ≤ 1.2× a plain start\n");
  } finally {
    release();
    await runner.close();
    rmSync(root, { recursive: true, force: true });
  }
}
