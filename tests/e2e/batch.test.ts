/**
 * `runner batch` end to end: the built CLI, real Docker and git, tasks made
 * here on small repositories. The model is the scripted server: in the
 * runner's process (`provider: scripted`), or, where the test counts the
 * requests each task's model gets, one ScriptedModelServer per task in this
 * process, reached by the openai provider over loopback.
 */
import { createServer } from "node:net";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import type { BatchReport } from "../../src/batch/batch-report.js";
import { loadScript, ScriptedModelServer } from "../../src/model/scripted-model-server.js";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import {
  containersOfRun,
  eventsOfType,
  readEvents,
  readJson,
  removeContainersOfRun,
  runCli,
  startCli,
  toolCall,
  waitFor,
  writeScriptedTask,
} from "../helpers/runner-cli.js";

const WRITE_DONE = { turns: [{ tool_calls: [toolCall("write_file", { path: "done.txt", content: "done\n" })] }, { content: "Done." }] };
const VERIFY_DONE = { command: "test -f done.txt", timeout_sec: 60 };

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** A loopback port nothing listens on (bound, then closed): a model endpoint that is down. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Points a task written by writeScriptedTask at an OpenAI-compatible endpoint (no script: the openai provider). */
function useEndpoint(taskFile: string, baseURL: string): void {
  const fields = JSON.parse(readFileSync(taskFile, "utf8")) as Record<string, unknown>;
  fields.model = { provider: "openai", name: "scripted", base_url: baseURL, max_retries: 0 };
  writeFileSync(taskFile, JSON.stringify(fields));
}

/** A task whose model is a ScriptedModelServer of this process (its `requests` count what the task's model got). */
async function countedTask(directory: string, script: unknown) {
  const written = writeScriptedTask(directory, { script, task: { name: "counted", verify: VERIFY_DONE } });
  const server = new ScriptedModelServer(loadScript(join(directory, "script.yaml")));
  const baseURL = await server.start();
  cleanups.push(() => server.close());
  useEndpoint(written.task, baseURL);
  return { ...written, server };
}

function parseJunitSuite(xml: string): {
  tests: string;
  failures: string;
  errors: string;
  skipped: string;
  testcase: { name: string; failure?: { message: string; "#text"?: string }; error?: { message: string } }[];
} {
  expect(XMLValidator.validate(xml)).toBe(true);
  return new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "", isArray: (name) => name === "testcase" }).parse(xml).testsuites.testsuite;
}

function lines(text: string): string[] {
  return text.split("\n").filter(Boolean);
}

describe("runner batch (real CLI, real Docker, -j 2)", () => {
  it("runs a directory of tasks: outcomes per task, infrastructure errors retried and kept, agent failures not, the gate decides the exit code", async () => {
    await requireDocker();
    await using directory = temporaryDirectory("agent-runner-batch-e2e-");
    await using home = temporaryDirectory("agent-runner-batch-home-");
    const tasks = join(directory.path, "tasks");
    writeScriptedTask(join(tasks, "passes"), { script: WRITE_DONE, task: { name: "passes", verify: VERIFY_DONE } });
    writeScriptedTask(join(tasks, "fails-verify"), { script: { turns: [{ content: "I did nothing." }] }, task: { name: "fails-verify", verify: VERIFY_DONE } });
    // The agent's code outlasting its verification is the agent's failure, never an infrastructure error.
    writeScriptedTask(join(tasks, "verify-hangs"), { script: WRITE_DONE, task: { name: "verify-hangs", verify: { command: "sleep 60", timeout_sec: 1 } } });
    const port = await closedPort();
    useEndpoint(
      writeScriptedTask(join(tasks, "model-down"), { script: WRITE_DONE, task: { name: "model-down", verify: VERIFY_DONE } }).task,
      `http://127.0.0.1:${port}/v1`,
    );
    // A broken task file (`verfy:`) is that task's error; the others run.
    const typo = writeScriptedTask(join(tasks, "typo"), { script: WRITE_DONE, task: { name: "typo" } }).task;
    writeFileSync(typo, readFileSync(typo, "utf8").replace('"instruction"', '"verfy":{"command":"true"},"instruction"'));
    const junit = join(directory.path, "out", "junit.xml");
    const summary = join(directory.path, "out", "summary.md");
    const result = await runCli(
      ["batch", "run", tasks, "-j", "2", "--retries", "1", "--max-errors", "2", "--min-pass-rate", "0.3", "--junit", junit, "--summary", summary, "--json"],
      { RUNNER_HOME: home.path, OPENAI_API_KEY: "test-key" },
    );
    const out = lines(result.stdout);
    // --json: stdout is JSON only, the id first.
    const first = JSON.parse(out[0]!) as { batch_id: string; status: string };
    expect(first.status, result.stderr).toBe("running");
    expect(first.batch_id).toMatch(/^\d{8}-\d{6}-[0-9a-f]{4}$/);
    const batchId = first.batch_id;
    for (const line of out) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
    const last = JSON.parse(out.at(-1)!) as { batch_id: string; status: string; report: string };
    expect(last).toEqual({ batch_id: batchId, status: "passed", report: join(home.path, "batches", batchId, "batch-report.json") });
    expect(result.code, result.stderr).toBe(0);

    const report = readJson<BatchReport>(last.report);
    const byName = Object.fromEntries(report.tasks.map((task) => [task.name, task]));
    expect(Object.keys(byName)).toEqual(["fails-verify", "model-down", "passes", "typo", "verify-hangs"]);
    expect(byName["typo"]).toMatchObject({ status: "error", reason: "task_invalid", error: expect.stringMatching(/typo\/task\.yaml: .*\n.*verfy/) });
    expect(byName["typo"]!.attempts.map((attempt) => attempt.run_id)).toEqual([null]);
    expect(byName["passes"]).toMatchObject({ status: "succeeded", reason: "verified", task_file: join(tasks, "passes", "task.yaml") });
    // The agent's failure: never an error, never retried.
    expect(byName["fails-verify"]).toMatchObject({ status: "failed", reason: "verify_failed" });
    expect(byName["fails-verify"]!.attempts).toHaveLength(1);
    expect(byName["verify-hangs"]).toMatchObject({ status: "failed", reason: "verify_timed_out" });
    expect(byName["verify-hangs"]!.attempts).toHaveLength(1);
    // The endpoint down: an infrastructure error, retried once, both runs kept with their run ids.
    const down = byName["model-down"]!;
    expect(down).toMatchObject({ status: "error", reason: "connection_error" });
    expect(down.attempts.map((attempt) => [attempt.try, attempt.status, attempt.reason])).toEqual([
      [1, "error", "connection_error"],
      [2, "error", "connection_error"],
    ]);
    for (const attempt of down.attempts)
      expect(readJson(join(home.path, "runs", attempt.run_id!, "report.json"))).toMatchObject({ status: "error", reason: "connection_error" });
    expect(new Set(report.tasks.flatMap((task) => task.attempts.map((attempt) => attempt.run_id)).filter(Boolean)).size).toBe(5);
    expect(report.totals).toMatchObject({
      tasks: 5,
      succeeded: 1,
      failed: 2,
      error: 2,
      skipped: 0,
      pass_rate: 1 / 5,
      pass_rate_without_errors: 1 / 3,
      runs: 5,
      retries: 1,
      errored_attempts: 2,
    });
    expect(report.totals.tokens.prompt).toBeGreaterThan(0);
    expect(report.totals.duration_ms!.p90).toBeGreaterThanOrEqual(report.totals.duration_ms!.p50);

    // batch.jsonl: every start (with its run id) and every finish, one JSON line each.
    const journal = lines(readFileSync(join(home.path, "batches", batchId, "batch.jsonl"), "utf8")).map(
      (line) => JSON.parse(line) as { type: string; run_id?: string },
    );
    expect(
      journal
        .filter((line) => line.type === "attempt.started")
        .map((line) => line.run_id)
        .sort(),
    ).toEqual(report.tasks.flatMap((task) => task.attempts.flatMap((attempt) => (attempt.run_id ? [attempt.run_id] : []))).sort());
    expect(journal.filter((line) => line.type === "attempt.finished")).toHaveLength(6);

    // JUnit: one testcase per run, failure = the agent's, error = infrastructure; it parses as XML.
    const xml = readFileSync(junit, "utf8");
    expect(readFileSync(join(home.path, "batches", batchId, "junit.xml"), "utf8")).toBe(xml);
    const suite = parseJunitSuite(xml);
    expect(suite).toMatchObject({ tests: "6", failures: "2", errors: "3" });
    const names = suite.testcase.map((testcase) => testcase.name);
    expect(new Set(names).size).toBe(6);
    const failsVerify = suite.testcase.find((testcase) => testcase.name === "fails-verify")!;
    expect(failsVerify.failure!.message).toBe("verify_failed");
    // The failure's text names the verify command and its exit, first thing a CI viewer shows.
    expect(failsVerify.failure!["#text"]).toMatch(/^\$ test -f done\.txt\nexit 1\n/m);
    expect(suite.testcase.find((testcase) => testcase.name === "typo")!.error!.message).toBe("task_invalid");
    expect(suite.testcase.filter((testcase) => testcase.error?.message === "connection_error")).toHaveLength(2);
    expect(readFileSync(summary, "utf8")).toMatch(
      /\| model-down \| error \| connection_error: model endpoint http:\/\/127\.0\.0\.1:\d+\/v1 could not be reached/,
    );

    // `batch show --json` prints batch-report.json.
    const shown = await runCli(["batch", "show", batchId, "--json"], { RUNNER_HOME: home.path });
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toEqual(report);
    const table = await runCli(["batch", "show", batchId], { RUNNER_HOME: home.path });
    expect(table.stdout).toMatch(/^model-down +error +connection_error: model endpoint .* +2 /m);

    // report.html links each run's directory and patch.diff, relative to the batch directory.
    const batchDirectory = join(home.path, "batches", batchId);
    // Each run is linked from the table and from its task's section; links to the page's own sections start with #.
    const hrefs = [...new Set([...readFileSync(join(batchDirectory, "report.html"), "utf8").matchAll(/href="([^"#][^"]*)"/g)].map((match) => match[1]!))];
    const runs = report.tasks.flatMap((task) => task.attempts).filter((run) => run.run_id !== null);
    expect(hrefs.filter((href) => !href.endsWith("/patch.diff")).sort()).toEqual(runs.map((run) => `../../runs/${run.run_id}`).sort());
    expect(hrefs.filter((href) => href.endsWith("/patch.diff"))).toHaveLength(runs.filter((run) => run.patch).length);
    for (const href of hrefs) expect(existsSync(join(batchDirectory, decodeURI(href))), href).toBe(true);

    // `batch merge` of the one shard there is: the same tasks and totals, the same exit code, a batch of its own.
    const merged = await runCli(["batch", "merge", last.report, "--json"], { RUNNER_HOME: home.path });
    expect(merged.code, merged.stderr).toBe(0);
    const mergedReport = readJson<BatchReport>(JSON.parse(lines(merged.stdout).at(-1)!).report);
    expect(mergedReport.tasks).toEqual(report.tasks);
    expect({ ...mergedReport.totals, wall_ms: 0 }).toEqual({ ...report.totals, wall_ms: 0 });
    expect(mergedReport.merged_from).toEqual([batchId]);
  });

  it("SIGINT: the run in flight is cancelled, every report is written, exit 130; tasks not finished are skipped (interrupted)", async () => {
    await requireDocker();
    await using directory = temporaryDirectory("agent-runner-batch-e2e-");
    await using home = temporaryDirectory("agent-runner-batch-home-");
    const tasks = join(directory.path, "tasks");
    const slow = { turns: [{ tool_calls: [toolCall("run_shell", { command: "sleep 600" })] }, ...WRITE_DONE.turns] };
    writeScriptedTask(join(tasks, "a-slow"), { script: slow, task: { name: "a-slow", verify: VERIFY_DONE } });
    writeScriptedTask(join(tasks, "b-waits"), { script: WRITE_DONE, task: { name: "b-waits", verify: VERIFY_DONE } });
    const junit = join(directory.path, "junit.xml");
    const running = startCli(["batch", "run", tasks, "-j", "1", "--junit", junit, "--json"], { RUNNER_HOME: home.path });
    cleanups.push(() => void (running.exited || running.child.kill("SIGKILL")));
    const batchId = await waitFor("the batch id", () => /^\{"batch_id":"([^"]+)","status":"running"\}$/m.exec(running.output().stdout)?.[1], {
      process: running,
    });
    const journalFile = join(home.path, "batches", batchId, "batch.jsonl");
    const runId = await waitFor(
      "a-slow sleeping in its tool call",
      () => {
        const started = existsSync(journalFile)
          ? lines(readFileSync(journalFile, "utf8"))
              .map((line) => JSON.parse(line) as { type: string; run_id?: string })
              .find((line) => line.type === "attempt.started")
          : undefined;
        return started?.run_id && eventsOfType(readEvents(join(home.path, "runs", started.run_id)), "tool_call.started").length > 0
          ? started.run_id
          : undefined;
      },
      { process: running, timeoutMs: 60_000 },
    );
    cleanups.push(() => removeContainersOfRun(runId));
    running.child.kill("SIGINT");
    const result = await running.result;
    expect(result.code, result.stderr).toBe(130);
    const last = JSON.parse(lines(result.stdout).at(-1)!) as { status: string };
    expect(last.status).toBe("interrupted");
    const report = readJson<BatchReport>(join(home.path, "batches", batchId, "batch-report.json"));
    expect(report.tasks.map((task) => [task.name, task.status, task.reason])).toEqual([
      ["a-slow", "skipped", "interrupted"],
      ["b-waits", "skipped", "interrupted"],
    ]);
    expect(readJson(join(home.path, "runs", runId, "report.json"))).toMatchObject({ status: "cancelled", error: "cancelled: the batch was interrupted" });
    // The progress went to stderr (--json): the run's start, then the totals counting it and the way to go on.
    expect(result.stderr).toContain(`start a-slow run ${runId}`);
    expect(report.totals.runs).toBe(1);
    expect(result.stderr).toContain(`2 task(s) did not finish; continue with: runner batch resume ${batchId}`);
    expect(containersOfRun(runId)).toEqual([]);
    const suite = parseJunitSuite(readFileSync(junit, "utf8"));
    expect(suite).toMatchObject({ tests: "2", skipped: "2" });
    expect(readFileSync(join(home.path, "batches", batchId, "summary.md"), "utf8")).toContain(": interrupted");
  });

  it("kill -9 mid-way, then `batch resume`: every task once, runs in flight resumed, no model request to a finished task, totals as uninterrupted", async () => {
    await requireDocker();
    await using directory = temporaryDirectory("agent-runner-batch-e2e-");
    await using home = temporaryDirectory("agent-runner-batch-home-");
    const tasks = join(directory.path, "tasks");
    // -j 2: a-fast and b-slow start; a-fast finishes, c-slow starts; both slow ones sleep in a tool call; d-later waits.
    const slow = { turns: [{ tool_calls: [toolCall("run_shell", { command: "sleep 600" })] }, ...WRITE_DONE.turns] };
    const counted = {
      "a-fast": await countedTask(join(tasks, "a-fast"), WRITE_DONE),
      "b-slow": await countedTask(join(tasks, "b-slow"), slow),
      "c-slow": await countedTask(join(tasks, "c-slow"), slow),
      "d-later": await countedTask(join(tasks, "d-later"), WRITE_DONE),
    };
    const environment = { RUNNER_HOME: home.path, OPENAI_API_KEY: "test-key" };
    const first = startCli(["batch", "run", tasks, "-j", "2"], environment);
    cleanups.push(() => void (first.exited || first.child.kill("SIGKILL")));
    const batchId = await waitFor("the batch id", () => /^batch (\S+)$/m.exec(first.output().stdout)?.[1], { process: first });
    const journalFile = join(home.path, "batches", batchId, "batch.jsonl");
    const journal = () =>
      existsSync(journalFile)
        ? lines(readFileSync(journalFile, "utf8")).map((line) => JSON.parse(line) as { type: string; task?: string; run_id?: string })
        : [];
    const runOf = (task: string) => journal().find((line) => line.type === "attempt.started" && line.task === task)?.run_id;
    await waitFor(
      "a-fast finished and both slow tasks sleeping in their tool call",
      () =>
        journal().some((line) => line.type === "attempt.finished" && line.task === "a-fast") &&
        ["b-slow", "c-slow"].every((task) => {
          const runId = runOf(task);
          return runId && eventsOfType(readEvents(join(home.path, "runs", runId)), "tool_call.started").length > 0;
        }),
      { process: first, timeoutMs: 60_000 },
    );
    const inFlight = { "b-slow": runOf("b-slow")!, "c-slow": runOf("c-slow")! };
    for (const runId of Object.values(inFlight)) cleanups.push(() => removeContainersOfRun(runId));
    expect(first.child.kill("SIGKILL")).toBe(true);
    expect((await first.result).signal).toBe("SIGKILL");
    expect(runOf("d-later")).toBeUndefined();
    const requestsAtKill = Object.fromEntries(Object.entries(counted).map(([name, task]) => [name, task.server.requests.length]));
    expect(requestsAtKill).toEqual({ "a-fast": 2, "b-slow": 1, "c-slow": 1, "d-later": 0 });

    const resumed = await runCli(["batch", "resume", batchId, "--json"], environment);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(lines(resumed.stdout)[0]).toBe(JSON.stringify({ batch_id: batchId, status: "running" }));
    const report = readJson<BatchReport>(join(home.path, "batches", batchId, "batch-report.json"));
    expect(report.tasks.map((task) => [task.name, task.status, task.reason, task.attempts.length])).toEqual([
      ["a-fast", "succeeded", "verified", 1],
      ["b-slow", "succeeded", "verified", 1],
      ["c-slow", "succeeded", "verified", 1],
      ["d-later", "succeeded", "verified", 1],
    ]);
    // The runs in flight were continued (the same run ids), not started again; the finished task got no request.
    for (const [task, runId] of Object.entries(inFlight)) {
      expect(report.tasks.find((entry) => entry.name === task)!.attempts[0]!.run_id).toBe(runId);
      expect(readJson(join(home.path, "runs", runId, "report.json"))).toMatchObject({ status: "succeeded", resumes: 1 });
      expect(containersOfRun(runId)).toEqual([]);
    }
    expect(Object.fromEntries(Object.entries(counted).map(([name, task]) => [name, task.server.requests.length]))).toEqual({
      "a-fast": 2,
      "b-slow": 3,
      "c-slow": 3,
      "d-later": 2,
    });
    expect(report.totals).toMatchObject({ tasks: 4, succeeded: 4, failed: 0, error: 0, skipped: 0, pass_rate: 1, runs: 4, retries: 0 });
    expect(report).toMatchObject({ status: "passed", exit_code: 0 });
  });

  it("images once, up front: identical builds are built once, an image that cannot be had fails its tasks before any model call", async () => {
    await requireDocker();
    await using directory = temporaryDirectory("agent-runner-batch-e2e-");
    await using home = temporaryDirectory("agent-runner-batch-home-");
    const tasks = join(directory.path, "tasks");
    // Two tasks whose Dockerfiles are identical in different directories: one build, the other reuses it.
    const dockerfile = `FROM ${SANDBOX_IMAGE}\nRUN echo "batch build ${randomUUID()}" > /etc/batch-marker\n`;
    for (const name of ["built-a", "built-b"]) {
      const written = writeScriptedTask(join(tasks, name), { script: WRITE_DONE, task: { name, verify: VERIFY_DONE } });
      mkdirSync(join(tasks, name, "image"));
      writeFileSync(join(tasks, name, "image", "Dockerfile"), dockerfile);
      const fields = JSON.parse(readFileSync(written.task, "utf8")) as { sandbox: Record<string, unknown> };
      fields.sandbox = { ...fields.sandbox, image: undefined, build: { context: "./image" } };
      writeFileSync(written.task, JSON.stringify(fields));
    }
    // A registry on loopback that is not there: the pull fails at once and no packet leaves the host.
    const absent = `localhost:1/agent-runner-absent/${randomUUID()}:1`;
    const counted = await countedTask(join(tasks, "absent"), WRITE_DONE);
    const fields = JSON.parse(readFileSync(counted.task, "utf8")) as { sandbox: Record<string, unknown> };
    fields.sandbox = { ...fields.sandbox, image: absent };
    writeFileSync(counted.task, JSON.stringify(fields));
    const environment = { RUNNER_HOME: home.path, OPENAI_API_KEY: "test-key" };

    const prepared = await runCli(["batch", "prepare", tasks, "--json"], environment);
    expect(prepared.code, prepared.stdout + prepared.stderr).toBe(3);
    const images = lines(prepared.stdout).map((line) => JSON.parse(line) as { need: string; tasks: string[]; source: string | null; error: string | null });
    expect(images.map((image) => image.source).sort()).toEqual(["built", "reused", null].sort());
    const missing = images.find((image) => image.error !== null)!;
    expect(missing).toMatchObject({ need: absent, tasks: ["absent"] });
    expect(missing.error).toMatch(/could not be pulled/);

    const result = await runCli(["batch", "run", tasks, "-j", "2", "--json", "--max-errors", "5"], environment);
    const report = readJson(JSON.parse(lines(result.stdout).at(-1)!).report as string) as unknown as BatchReport;
    const byName = Object.fromEntries(report.tasks.map((task) => [task.name, task]));
    expect(Object.keys(byName).sort(), result.stdout + result.stderr).toEqual(["absent", "built-a", "built-b"]);
    expect(byName["built-a"]!.status).toBe("succeeded");
    expect(byName["built-b"]!.status).toBe("succeeded");
    expect(byName["absent"]).toMatchObject({ status: "error", reason: "image_unavailable" });
    expect(byName["absent"]!.attempts[0]!.run_id).toBeNull();
    expect(counted.server.requests).toHaveLength(0);
    expect(result.stderr).toMatch(/cannot be had; its 1 task\(s\) end in error/);
  });

  it("batch verify regrades every finished attempt with no model call: verdicts change with what verify sees now", async () => {
    await requireDocker();
    await using directory = temporaryDirectory("agent-runner-batch-e2e-");
    await using home = temporaryDirectory("agent-runner-batch-home-");
    const tasks = join(directory.path, "tasks");
    // The verdict depends on GRADE, passed in from the runner's environment: the regrade sees its value then.
    const verify = { command: 'test -f done.txt && test "$GRADE" = pass', timeout_sec: 60 };
    const counted = await countedTask(join(tasks, "graded"), WRITE_DONE);
    const fields = JSON.parse(readFileSync(counted.task, "utf8")) as Record<string, unknown> & { sandbox: Record<string, unknown> };
    writeFileSync(counted.task, JSON.stringify({ ...fields, verify, sandbox: { ...fields.sandbox, pass_env: ["GRADE"] } }));
    writeScriptedTask(join(tasks, "no-work"), { script: { turns: [{ content: "I did nothing." }] }, task: { name: "no-work", verify: VERIFY_DONE } });
    const environment = { RUNNER_HOME: home.path, OPENAI_API_KEY: "test-key" };
    const ran = await runCli(["batch", "run", tasks, "--json", "--min-pass-rate", "0.5"], { ...environment, GRADE: "fail" });
    const batchId = JSON.parse(lines(ran.stdout).at(-1)!).batch_id as string;
    const requests = counted.server.requests.length;
    expect(requests).toBeGreaterThan(0);

    const regraded = await runCli(["batch", "verify", batchId, "--json"], { ...environment, GRADE: "pass" });
    expect(regraded.code, regraded.stdout + regraded.stderr).toBe(0);
    const report = JSON.parse(regraded.stdout) as { runs: { task: string; before: boolean; after: boolean }[]; totals: { passed: number; changed: number } };
    const byTask = Object.fromEntries(report.runs.map((run) => [run.task, run]));
    expect(byTask["graded"]).toMatchObject({ before: false, after: true });
    expect(byTask["no-work"]).toMatchObject({ before: false, after: false });
    expect(report.totals).toMatchObject({ passed: 1, changed: 1 });
    expect(existsSync(join(home.path, "batches", batchId, "batch-verify.json"))).toBe(true);
    // No model call: the scripted endpoint saw nothing new.
    expect(counted.server.requests.length).toBe(requests);
  });
});
