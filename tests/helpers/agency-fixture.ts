/**
 * Agencies for tests: a git repository, agency.yaml and agent files with
 * scripted models, all written into a test directory (JSON, which YAML reads).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { AgencyReport } from "../../src/agency/agency-directory.js";
import { createRunner, type AgencyRunner } from "../../src/agency/agency.js";
import type { RunEnvelope } from "../../src/events/event-catalogue.js";
import { HostDirectorySandboxProvider, type HostDirectorySandboxOptions } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { fakeTierEnvironment } from "./fake-runner.js";
import { temporaryDirectory } from "./git-repository.js";

export interface AgentSpec {
  triggers: string[];
  capabilities?: string[];
  emits?: string[];
  /** Scripted turns (tool_calls / content). */
  turns: unknown[];
  verify?: { command: string; timeout_sec?: number };
  policies?: Record<string, unknown>;
  extra?: Record<string, unknown>;
}

/** Writes `<directory>/repo` (a git repository with `files`), `agents/<name>.yaml`, `scripts/<name>.yaml`, `agency.yaml`; returns agency.yaml's path and a git helper. */
export function writeAgency(
  directory: string,
  options: { files?: Record<string, string>; agents: Record<string, AgentSpec>; agency?: Record<string, unknown> },
): { agencyFile: string; repo: string; git: (...args: string[]) => string } {
  const repo = join(directory, "repo");
  mkdirSync(repo, { recursive: true });
  for (const [path, content] of Object.entries(options.files ?? { "README.md": "test repository\n" })) {
    mkdirSync(dirname(join(repo, path)), { recursive: true });
    writeFileSync(join(repo, path), content);
  }
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=test", "-c", "user.email=test@localhost", ...args], { cwd: repo, encoding: "utf8" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "initial");
  mkdirSync(join(directory, "agents"), { recursive: true });
  mkdirSync(join(directory, "scripts"), { recursive: true });
  for (const [name, spec] of Object.entries(options.agents)) {
    writeFileSync(join(directory, "scripts", `${name}.yaml`), JSON.stringify({ turns: spec.turns }));
    const agent = {
      name,
      description: `the ${name}`,
      model: { provider: "scripted", script: `../scripts/${name}.yaml` },
      instructions: `Act as the ${name}.`,
      triggers: spec.triggers.map((event) => ({ event })),
      capabilities: (spec.capabilities ?? ["read_file"]).map((tool) => ({ tool })),
      emits: spec.emits ?? [],
      ...(spec.verify ? { verify: spec.verify } : {}),
      ...(spec.policies ? { policies: spec.policies } : {}),
      instructions_extra: undefined,
      ...spec.extra,
    };
    delete (agent as Record<string, unknown>).instructions_extra;
    writeFileSync(join(directory, "agents", `${name}.yaml`), JSON.stringify({ agent }, null, 2));
  }
  const agencyFile = join(directory, "agency.yaml");
  writeFileSync(
    agencyFile,
    JSON.stringify(
      {
        name: "test-agency",
        workspace: "./repo",
        agents: "./agents",
        goal: "review.approved",
        start: [{ type: "task.ready", subject: "t1" }],
        ...options.agency,
      },
      null,
      2,
    ),
  );
  return { agencyFile, repo, git };
}

/** An AgencyRunner over the host-directory sandbox and a fresh RUNNER_HOME; `await using` closes it and removes the home. */
export async function fakeAgencyRunner(options: HostDirectorySandboxOptions = {}) {
  const home = temporaryDirectory("agent-runner-agency-home-");
  const provider = new HostDirectorySandboxProvider(options);
  const runner: AgencyRunner = await createRunner({ home: home.path, sandboxProvider: provider, environment: fakeTierEnvironment(home.path) });
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

/** Model requests a run made (its `model_call.started` events, every attempt). */
export function modelRequestsOf(home: string, runId: string): number {
  return readFileSync(join(home, "runs", runId, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RunEnvelope)
    .filter((envelope) => envelope.type.includes("model_call.started")).length;
}

/** The agency's event types in log order. */
export function eventTypes(home: string, report: AgencyReport): string[] {
  return readFileSync(join(home, "agencies", report.agency_id, "bus.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { type: string }).type);
}
