/**
 * examples/ci/: the GitHub Actions workflow against GitHub's own workflow
 * schema (@actions/workflow-parser, the parser GitHub's tooling uses), both
 * recipes against zod shapes of the parts the runner relies on (shards,
 * artifacts, the merge job), and their `runner` commands run here, as the CI
 * would run them, on a small batch: each shard of the matrix / `parallel:`
 * in a workspace of its own, artifacts carried as the CI carries them, then
 * the merge job, whose report must equal the unsharded batch's (timings
 * aside). Steps that set up the machine (checkout, `make setup`, the image
 * cache's docker load/save) are not run: this machine is set up; the test
 * names each one it leaves out, so a new step cannot slip by unchecked.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { XMLParser } from "fast-xml-parser";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { BatchReport } from "../../src/batch/batch-report.js";
import { shardOf } from "../../src/batch/discover-tasks.js";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { CLI, readJson, ROOT, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";

const GITHUB = join(ROOT, "examples/ci/github-actions.yml");
const GITLAB = join(ROOT, "examples/ci/gitlab-ci.yml");

const step = z.object({
  id: z.string().optional(),
  name: z.string().optional(),
  if: z.string().optional(),
  run: z.string().optional(),
  uses: z.string().optional(),
  with: z.record(z.string(), z.unknown()).optional(),
});
type Step = z.infer<typeof step>;

/** The parts of the GitHub workflow the runner relies on. */
const githubShape = z.object({
  env: z.object({ TASKS: z.string(), RUNNER_HOME: z.string() }).loose(),
  jobs: z.object({
    batch: z.object({
      strategy: z.object({ "fail-fast": z.literal(false), matrix: z.object({ shard: z.array(z.number().int().positive()).min(1) }) }),
      env: z.object({ SHARD: z.string(), REPORTS: z.string() }).loose(),
      steps: z.array(step),
    }),
    merge: z.object({
      needs: z.union([z.literal("batch"), z.array(z.string()).refine((needs) => needs.includes("batch"))]),
      if: z.literal("always()"),
      steps: z.array(step),
    }),
  }),
});

const gitlabJob = z.object({
  extends: z.string().optional(),
  stage: z.string(),
  script: z.array(z.string()),
  after_script: z.array(z.string()).optional(),
  variables: z.record(z.string(), z.string()).optional(),
  artifacts: z.object({ when: z.literal("always"), paths: z.array(z.string()), reports: z.object({ junit: z.string() }).optional() }),
});

/** The parts of the GitLab pipeline the runner relies on (GitLab's own schema is not on npm). */
const gitlabShape = z.object({
  stages: z.array(z.string()),
  variables: z.object({ TASKS: z.string(), RUNNER_HOME: z.string() }).loose(),
  ".agent-runner": z.object({ before_script: z.array(z.string()) }).loose(),
  batch: gitlabJob.extend({ parallel: z.number().int().min(2).max(200) }),
  merge: gitlabJob.extend({ when: z.literal("always"), needs: z.array(z.object({ job: z.literal("batch"), artifacts: z.literal(true) })) }),
});

/** Substitutes `${{ expr }}` from `context` (the few expressions the recipe uses); an unknown expression fails the test. */
function expand(text: string, context: Record<string, string>): string {
  return text.replace(/\$\{\{\s*([^}]+?)\s*\}\}/g, (_, expression: string) => {
    if (!(expression in context)) throw new Error(`examples/ci/github-actions.yml: the test does not know \${{ ${expression} }}`);
    return context[expression]!;
  });
}

/** GitLab's `$VAR` in a variables value, from `variables`. */
function expandGitlab(text: string, variables: Record<string, string>): string {
  return text.replace(/\$(\w+)/g, (whole, name: string) => variables[name] ?? whole);
}

/** Runs a script as the CI would: bash with errexit (and GitHub's pipefail), in `cwd`, with `environment`; its exit code. */
function runScript(script: string, cwd: string, environment: Record<string, string>, flags: string[]): { code: number; output: string } {
  const result = spawnSync("bash", ["--noprofile", "--norc", ...flags, "-c", script], { cwd, env: { ...process.env, ...environment }, encoding: "utf8" });
  return { code: result.status ?? -1, output: `${result.stdout}${result.stderr}` };
}

/** A directory holding `runner`: the built CLI, as `make link` puts it on PATH. */
function runnerOnPath(directory: string): string {
  const bin = join(directory, "bin");
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, "runner"), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
  chmodSync(join(bin, "runner"), 0o755);
  return `${bin}:${process.env.PATH}`;
}

/** What of a report must be equal however the batch was split: everything but ids, run ids, paths and times. */
function comparable(report: BatchReport) {
  return {
    status: report.status,
    exit_code: report.exit_code,
    gate: report.gate,
    flaky: report.flaky,
    totals: { ...report.totals, duration_ms: null, wall_ms: null },
    tasks: report.tasks.map((task) => ({
      name: task.name,
      status: task.status,
      reason: task.reason,
      attempts: task.attempts.map((attempt) => [attempt.attempt, attempt.try, attempt.status, attempt.reason, attempt.steps, attempt.tokens]),
    })),
  };
}

function junitCases(xml: string): [string, string][] {
  const suite = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "", isArray: (name) => name === "testcase" }).parse(xml).testsuites.testsuite as {
    testcase?: { name: string; failure?: unknown; error?: unknown; skipped?: unknown }[];
  };
  return (suite.testcase ?? []).map((testcase) => [
    testcase.name,
    testcase.failure ? "failed" : testcase.error ? "error" : testcase.skipped ? "skipped" : "passed",
  ]);
}

/** Three tasks (two pass, one fails its verify), named so that each of `shards` shards has one at least. */
function writeTinyBatch(tasks: string, shards: number): void {
  const names: string[] = [];
  for (let index = 0; names.length < 3 || new Set(names.map((name) => shardOf(name, shards))).size < shards; index += 1) {
    names.push(`task-${String(index).padStart(2, "0")}`);
    if (names.length > 3) names.shift();
  }
  const verify = { command: "test -f done.txt", timeout_sec: 60 };
  for (const [index, name] of names.entries()) {
    const script =
      index === 1
        ? { turns: [{ content: "I did nothing." }] }
        : { turns: [{ tool_calls: [toolCall("write_file", { path: "done.txt", content: `${name}\n` })] }, { content: "Done." }] };
    writeScriptedTask(join(tasks, name), { script, task: { name, verify } });
  }
}

describe("examples/ci recipes", () => {
  it("github-actions.yml passes GitHub's workflow schema and has the shards, artifacts and merge job the runner relies on", async () => {
    const content = readFileSync(GITHUB, "utf8");
    // The check has teeth: a key the schema does not know is an error.
    await using scratch = temporaryDirectory("agent-runner-ci-schema-");
    const broken = join(scratch.path, "broken.yml");
    writeFileSync(broken, content.replace("runs-on:", "runs_on:"));
    const checked = githubSchemaErrors([GITHUB, broken]);
    expect(checked[GITHUB]).toEqual([]);
    expect(checked[broken]!.join("\n")).toMatch(/Unexpected value 'runs_on'/);
    const workflow = githubShape.parse(parse(content, { uniqueKeys: true }));
    const shards = workflow.jobs.batch.strategy.matrix.shard;
    expect(shards).toEqual(Array.from({ length: shards.length }, (_, index) => index + 1));
    expect(workflow.jobs.batch.env.SHARD).toBe(`\${{ matrix.shard }}/${shards.length}`);
    const upload = workflow.jobs.batch.steps.find((entry) => entry.uses?.startsWith("actions/upload-artifact@"))!;
    expect(upload).toMatchObject({ if: "always()", with: { name: "batch-shard-${{ matrix.shard }}" } });
    const download = workflow.jobs.merge.steps.find((entry) => entry.uses?.startsWith("actions/download-artifact@"))!;
    expect(download.with).toEqual({ pattern: "batch-shard-*", path: "shards" });
    expect(workflow.jobs.batch.steps.find((entry) => entry.id === "shard")!.run).toMatch(/--summary "\$GITHUB_STEP_SUMMARY"/);
  });

  it("gitlab-ci.yml parses and has `parallel:`, JUnit reports and the merge job the runner relies on", () => {
    const pipeline = gitlabShape.parse(parse(readFileSync(GITLAB, "utf8"), { uniqueKeys: true }));
    expect(pipeline.stages).toEqual(["batch", "report"]);
    expect(pipeline.batch.artifacts.reports?.junit).toBe("reports/shard-*/junit.xml");
    expect(pipeline.batch.script.some((line) => line.includes('--shard "$CI_NODE_INDEX/$CI_NODE_TOTAL"'))).toBe(true);
    expect(pipeline.merge.artifacts.reports).toBeUndefined();
  });

  it("their runner commands on a small batch: shard 1/2 and 2/2, then merge, equal the unsharded batch (timings aside), exit codes the gate's", async () => {
    await requireDocker();
    await using directory = temporaryDirectory("agent-runner-ci-recipes-");
    const tasks = join(directory.path, "tasks");
    const workflow = githubShape.parse(parse(readFileSync(GITHUB, "utf8")));
    const pipeline = gitlabShape.parse(parse(readFileSync(GITLAB, "utf8")));
    const shards = workflow.jobs.batch.strategy.matrix.shard.length;
    expect(pipeline.batch.parallel).toBe(shards);
    writeTinyBatch(tasks, shards);
    const PATH = runnerOnPath(directory.path);

    // The unsharded batch, with the shards' options.
    const unshardedHome = join(directory.path, "unsharded-home");
    const unsharded = await runCli(["batch", "run", tasks, "-j", "4", "--retries", "1", "--json"], { RUNNER_HOME: unshardedHome });
    expect(unsharded.code, unsharded.stderr).toBe(1);
    const unshardedReport = readJson<BatchReport>(JSON.parse(unsharded.stdout.trim().split("\n").at(-1)!).report);
    const unshardedJunit = junitCases(readFileSync(join(unshardedHome, "batches", unshardedReport.batch_id, "junit.xml"), "utf8"));

    // GitHub Actions: each matrix job in its own workspace; the artifacts downloaded into the merge job's shards/<name>/.
    {
      const leftOut = (job: Step[], run: string[]) => job.filter((entry) => !run.includes(entry.id ?? "")).map((entry) => entry.id ?? entry.name ?? entry.uses);
      expect(leftOut(workflow.jobs.batch.steps, ["shard", "keep-report"])).toEqual([
        "actions/checkout@v4",
        "actions/checkout@v4",
        "actions/setup-node@v4",
        "image-cache",
        "Load the cached sandbox image",
        "Set up agent-runner",
        "Save the sandbox image for the cache",
        "Upload this shard's reports",
      ]);
      expect(leftOut(workflow.jobs.merge.steps, ["merge", "keep-merged"])).toEqual([
        "actions/checkout@v4",
        "actions/setup-node@v4",
        "Build agent-runner",
        "actions/download-artifact@v4",
        "Upload the merged reports",
      ]);
      const mergeWorkspace = join(directory.path, "github-merge");
      const secrets = { "secrets.OPENAI_API_KEY": "" };
      for (let shard = 1; shard <= shards; shard += 1) {
        const workspace = join(directory.path, `github-shard-${shard}`);
        mkdirSync(workspace, { recursive: true });
        const context = { "github.workspace": workspace, "matrix.shard": String(shard), ...secrets };
        const environment: Record<string, string> = { PATH, GITHUB_STEP_SUMMARY: join(workspace, "step-summary.md") };
        for (const [name, value] of [...Object.entries(workflow.env), ...Object.entries(workflow.jobs.batch.env)])
          environment[name] = expand(String(value), { ...context, ...prefixed("env.", environment) });
        // The recipe's TASKS is a placeholder for the user's tasks: here, the small batch.
        environment.TASKS = tasks;
        const run = (id: string) => runScript(workflow.jobs.batch.steps.find((entry) => entry.id === id)!.run!, workspace, environment, ["-eo", "pipefail"]);
        const shardRun = run("shard");
        const expectedCode = readdirShardHasFailure(tasks, shard, shards) ? 1 : 0;
        expect(shardRun.code, shardRun.output).toBe(expectedCode);
        const kept = run("keep-report");
        expect(kept.code, kept.output).toBe(0);
        expect(readFileSync(environment.GITHUB_STEP_SUMMARY!, "utf8")).toMatch(/^## Batch \S+: (passed|failed)/);
        const upload = workflow.jobs.batch.steps.find((entry) => entry.uses?.startsWith("actions/upload-artifact@"))!;
        cpSync(
          join(workspace, expand(String(upload.with!.path), { ...context, ...prefixed("env.", environment) })),
          join(mergeWorkspace, "shards", expand(String(upload.with!.name), context)),
          { recursive: true },
        );
      }
      const environment: Record<string, string> = { PATH, GITHUB_STEP_SUMMARY: join(mergeWorkspace, "step-summary.md") };
      for (const [name, value] of Object.entries(workflow.env)) environment[name] = expand(String(value), { "github.workspace": mergeWorkspace });
      const merge = (id: string) =>
        runScript(workflow.jobs.merge.steps.find((entry) => entry.id === id)!.run!, mergeWorkspace, environment, ["-eo", "pipefail"]);
      const merged = merge("merge");
      expect(merged.code, merged.output).toBe(1);
      const keptMerged = merge("keep-merged");
      expect(keptMerged.code, keptMerged.output).toBe(0);
      const mergedReport = readJson<BatchReport>(join(mergeWorkspace, "merged", "batch-report.json"));
      expect(mergedReport.merged_from).toHaveLength(shards);
      expect(comparable(mergedReport)).toEqual(comparable(unshardedReport));
      expect(junitCases(readFileSync(join(mergeWorkspace, "merged", "junit.xml"), "utf8"))).toEqual(unshardedJunit);
      expect(existsSync(join(mergeWorkspace, "merged", "report.html"))).toBe(true);
      expect(readFileSync(environment.GITHUB_STEP_SUMMARY!, "utf8")).toMatch(/^## Batch \S+: failed/);
    }

    // GitLab CI: `parallel:` jobs (CI_NODE_INDEX/CI_NODE_TOTAL), each in its own project directory; `needs:` extracts every shard's artifacts into the merge job's.
    {
      const SETUP_LINES = [
        /^if \[ -f \.image-cache\/sandbox\.tar \]; then docker load/,
        /^make -C \.agent-runner (setup|link)$/,
        /^mkdir -p \.image-cache && docker save /,
      ];
      const runLines = (lines: string[]) => lines.filter((line) => !SETUP_LINES.some((pattern) => pattern.test(line)));
      expect(pipeline.batch.script.length - runLines(pipeline.batch.script).length).toBe(3);
      expect(pipeline.merge.script.length - runLines(pipeline.merge.script).length).toBe(1);
      const mergeDirectory = join(directory.path, "gitlab-merge");
      mkdirSync(mergeDirectory, { recursive: true });
      const variablesFor = (projectDirectory: string, extra: Record<string, string>) => {
        const variables: Record<string, string> = { CI_PROJECT_DIR: projectDirectory, ...extra };
        for (const [name, value] of Object.entries({ ...pipeline.variables, ...(pipeline.batch.variables ?? {}) }))
          variables[name] = expandGitlab(String(value), variables);
        return { ...variables, TASKS: tasks, PATH };
      };
      for (let shard = 1; shard <= shards; shard += 1) {
        const projectDirectory = join(directory.path, `gitlab-shard-${shard}`);
        mkdirSync(projectDirectory, { recursive: true });
        const variables = variablesFor(projectDirectory, { CI_NODE_INDEX: String(shard), CI_NODE_TOTAL: String(shards) });
        // GitLab runs a job's script lines as one shell script that stops at the first failing line; after_script in a shell of its own.
        const script = runScript(runLines(pipeline.batch.script).join("\n"), projectDirectory, variables, ["-e"]);
        expect(script.code, script.output).toBe(readdirShardHasFailure(tasks, shard, shards) ? 1 : 0);
        const after = runScript(pipeline.batch.after_script!.join("\n"), projectDirectory, variables, ["-e"]);
        expect(after.code, after.output).toBe(0);
        for (const path of pipeline.batch.artifacts.paths) cpSync(join(projectDirectory, path), join(mergeDirectory, path), { recursive: true });
      }
      expect(readdirSync(join(mergeDirectory, "reports")).sort()).toEqual(Array.from({ length: shards }, (_, index) => `shard-${index + 1}`));
      const variables = variablesFor(mergeDirectory, {});
      const merged = runScript(runLines(pipeline.merge.script).join("\n"), mergeDirectory, variables, ["-e"]);
      expect(merged.code, merged.output).toBe(1);
      const after = runScript(pipeline.merge.after_script!.join("\n"), mergeDirectory, variables, ["-e"]);
      expect(after.code, after.output).toBe(0);
      const mergedReport = readJson<BatchReport>(join(mergeDirectory, "merged", "batch-report.json"));
      expect(comparable(mergedReport)).toEqual(comparable(unshardedReport));
      expect(junitCases(readFileSync(join(mergeDirectory, "merged", "junit.xml"), "utf8"))).toEqual(unshardedJunit);
    }
  });
});

/** Errors per file of GitHub's workflow schema (tests/helpers/github-workflow-check.ts, in a process of its own). */
function githubSchemaErrors(files: string[]): Record<string, string[]> {
  const result = spawnSync(process.execPath, ["--import", "tsx", join(ROOT, "tests/helpers/github-workflow-check.ts"), ...files], {
    cwd: ROOT,
    encoding: "utf8",
  });
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as Record<string, string[]>;
}

/** `env.NAME` keys for {@link expand}. */
function prefixed(prefix: string, values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([name, value]) => [`${prefix}${name}`, value]));
}

/** Whether shard `shard` of `shards` holds the task that fails its verify (the second of writeTinyBatch's). */
function readdirShardHasFailure(tasks: string, shard: number, shards: number): boolean {
  const failing = readdirSync(tasks).sort()[1]!;
  return shardOf(failing, shards) === shard;
}
