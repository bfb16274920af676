import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadTaskFile } from "../../src/config/load-task.js";
import { ConfigError } from "../../src/errors.js";
import { natsConnectionOptions, parseNatsServers } from "../../src/bus/nats-connection.js";
import { jobSchema, taskKey, wireTask } from "../../src/worker/task-job.js";
import { writeScriptedTask } from "../helpers/fake-runner.js";

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

function task(fields: Record<string, unknown> = {}) {
  const directory = mkdtempSync(join(tmpdir(), "worker-task-job-"));
  directories.push(directory);
  const written = writeScriptedTask(directory, { script: { turns: [{ content: "done" }] }, task: { name: "t", ...fields } });
  return { task: loadTaskFile(written.task), directory };
}

describe("a task on the wire (src/worker/task-job.ts)", () => {
  it("carries the task without the submitter's paths, the script as text, and the names of host variables only", () => {
    const { task: loaded } = task({ sandbox: { secret_env: ["DEPLOY_TOKEN"], pass_env: ["LANG"] } });
    const wire = wireTask(loaded);
    expect(wire.script).toContain('"turns"');
    expect(wire.task).not.toHaveProperty("workspace");
    expect(wire.task).not.toHaveProperty("workspacePath");
    expect(wire.task.model).not.toHaveProperty("script");
    expect(JSON.stringify(wire)).not.toContain(loaded.workspacePath);
    expect(wire.task.sandbox).toMatchObject({ secret_env: ["DEPLOY_TOKEN"], pass_env: ["LANG"] });
  });

  it("refuses, naming the field, what a worker on another machine cannot have", () => {
    const { task: loaded } = task();
    const refused = (change: Record<string, unknown>) => {
      try {
        wireTask({ ...loaded, ...change } as typeof loaded);
        return null;
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
    };
    expect(refused({ hooks: { pre_tool_use: [{ command: ["/bin/true"] }], post_tool_use: [] } })).toMatch(/^hooks: /);
    expect(refused({ mcp_servers: { files: { command: "x" } } })).toMatch(/^mcp_servers: /);
    expect(refused({ sandbox: { ...loaded.sandbox, build: { context: "/tmp", dockerfile: "/tmp/Dockerfile", args: {} } } })).toMatch(/^sandbox\.build: /);
    expect(refused({ policy: "/home/me/policy.yaml" })).toMatch(/^policy: .*shipped policy name/);
    expect(refused({ on_success: "merge" })).toMatch(/^on_success: .*only the submitter/);
    expect(refused({})).toBeNull();
  });

  it("keys a job by what decides the run: the same task, commit and attempt give the same key; any change gives another", () => {
    const { task: loaded } = task();
    const wire = wireTask(loaded);
    const commit = "a".repeat(40);
    const key = taskKey({ ...wire, base_commit: commit }, 1);
    expect(key).toMatch(/^[a-f0-9]{32}$/);
    // Field order does not matter.
    const reordered = Object.fromEntries(Object.entries(wire.task).reverse());
    expect(taskKey({ task: reordered, script: wire.script, base_commit: commit }, 1)).toBe(key);
    expect(taskKey({ ...wire, base_commit: commit }, 2)).not.toBe(key);
    expect(taskKey({ ...wire, base_commit: "b".repeat(40) }, 1)).not.toBe(key);
    expect(taskKey({ ...wire, script: `${wire.script}\n# changed`, base_commit: commit }, 1)).not.toBe(key);
  });

  it("the queue's jobs are a union on kind: an unknown kind is not a task", () => {
    expect(jobSchema.safeParse({ kind: "agent_invocation", version: 1 }).success).toBe(false);
  });
});

describe("NATS connection settings (src/bus/nats-connection.ts)", () => {
  it("takes nats:// seeds, comma-separated, and refuses credentials in the URL and other schemes, naming --nats", () => {
    expect(parseNatsServers("nats://a.example.com:4222, 127.0.0.1:4223")).toEqual(["nats://a.example.com:4222", "nats://127.0.0.1:4223"]);
    expect(() => parseNatsServers("http://a.example.com:80")).toThrow(/--nats: .* must be nats:\/\/host:port/);
    expect(() => parseNatsServers("nats://someone@a.example.com:4222")).toThrow(/carries credentials; set RUNNER_NATS_USER/);
    expect(() => parseNatsServers("nats://a.example.com")).toThrow(/must be nats:\/\/host:port/);
    expect(() => parseNatsServers(" , ")).toThrow(/--nats: expected/);
  });

  it("reads user/password, an nkey seed file or TLS files from the environment, one way to authenticate at a time", () => {
    const directory = mkdtempSync(join(tmpdir(), "worker-nats-auth-"));
    directories.push(directory);
    writeFileSync(join(directory, "password"), "pw-from-file\n");
    const servers = ["nats://127.0.0.1:4222"];
    const base = { servers, name: "test" };
    expect(
      natsConnectionOptions({ ...base, environment: { RUNNER_NATS_USER: "runner", RUNNER_NATS_PASSWORD_FILE: join(directory, "password") } }),
    ).toMatchObject({
      user: "runner",
      pass: "pw-from-file",
    });
    expect(natsConnectionOptions({ ...base, environment: { RUNNER_NATS_NKEY: "SUAEXAMPLE" } }).authenticator).toBeTypeOf("function");
    expect(natsConnectionOptions({ ...base, environment: { RUNNER_NATS_CA: "/etc/ca.pem" } }).tls).toEqual({ caFile: "/etc/ca.pem" });
    expect(natsConnectionOptions({ ...base, environment: {} })).not.toHaveProperty("tls");
    expect(() => natsConnectionOptions({ ...base, environment: { RUNNER_NATS_USER: "u", RUNNER_NATS_NKEY: "SU" } })).toThrow(/give one way to authenticate/);
    expect(() => natsConnectionOptions({ ...base, environment: { RUNNER_NATS_PASSWORD: "pw" } })).toThrow(/set RUNNER_NATS_USER too/);
    expect(() => natsConnectionOptions({ ...base, environment: { RUNNER_NATS_NKEY_FILE: join(directory, "missing") } })).toThrow(
      /RUNNER_NATS_NKEY_FILE: cannot read/,
    );
    expect(() => natsConnectionOptions({ ...base, environment: { RUNNER_NATS_CERT: "/c.pem" } })).toThrow(/give both/);
  });
});
