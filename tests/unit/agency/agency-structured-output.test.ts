/**
 * Structured output (issue 22 item 4) in the Docker-free tier: an agent with
 * `output_schema` gets one correction turn, then `failed/output_invalid` and
 * `agency.needs_human`; a valid object is the invocation's `output`, published
 * in `agency.invocation.finished` and recorded, and a trigger's `when` routes on it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AgencyEvent } from "../../../src/bus/event-bus.js";
import { AgencyFileError, loadAgency } from "../../../src/agency/load-agency.js";
import { MAX_OUTPUT_BYTES, outputSchemaProblems, StructuredOutput } from "../../../src/agency/guards/structured-output.js";
import { triggeredBy } from "../../../src/agency/trigger-rule.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { fakeShell } from "../../helpers/fake-runner.js";
import { toolCall } from "../../helpers/runner-cli.js";
import { fakeAgencyRunner, modelRequestsOf, writeAgency } from "../../helpers/agency-fixture.js";

const VERDICT_SCHEMA = { type: "object", required: ["verdict"], properties: { verdict: { enum: ["approve", "changes_requested"] } } };

function logOf(directory: string): AgencyEvent[] {
  return readFileSync(join(directory, "bus.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as AgencyEvent);
}

describe("an agent with output_schema", () => {
  it("an invalid answer gets one correction turn; a second invalid one ends failed/output_invalid and publishes agency.needs_human", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        reviewer: {
          triggers: ["task.ready"],
          turns: [{ content: "Looks good to me." }, { content: '{"verdict": "maybe"}' }],
          extra: { output_schema: VERDICT_SCHEMA },
        },
      },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report.status).toBe("failed");
    expect(report.invocations).toEqual([expect.objectContaining({ agent: "reviewer", status: "failed", reason: "output_invalid", output: null })]);
    const runId = report.invocations[0]!.run_id;
    // Exactly one correction: the answer, the corrected answer, no third call.
    expect(modelRequestsOf(fake.home, runId)).toBe(2);
    const log = logOf(agency.directory);
    const needsHuman = log.filter((event) => event.type === "agency.needs_human");
    expect(needsHuman.map((event) => event.data)).toEqual([
      {
        invocation_id: report.invocations[0]!.invocation_id,
        agent: "reviewer",
        run_id: runId,
        reason: "output_invalid",
        problems: [expect.stringMatching(/\/verdict must be equal to one of the allowed values.*changes_requested/)],
      },
    ]);
    const finished = log.find((event) => event.type === "agency.invocation.finished")!;
    expect(finished.data).toMatchObject({ status: "failed", reason: "output_invalid", output: null });
    // The instruction names the schema, so the agent knows what to answer.
    const task = JSON.parse(readFileSync(join(fake.home, "runs", runId, "task.json"), "utf8")) as { instruction: string };
    expect(task.instruction).toContain('"changes_requested"');
  });

  it("a valid answer on the correction turn is the invocation's output: published, recorded, and routed on by a trigger's when", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const routeOn = (verdict: string) => [{ event: "agency.invocation.finished", when: { agent: "reviewer", "output.verdict": verdict } }];
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        reviewer: {
          triggers: ["task.ready"],
          turns: [{ content: '{"verdict": "reject"}' }, { content: 'One change is needed.\n```json\n{"verdict": "changes_requested"}\n```' }],
          extra: { output_schema: VERDICT_SCHEMA },
        },
        fixer: {
          triggers: [],
          emits: ["review.approved"],
          turns: [{ tool_calls: [toolCall("emit_event", { type: "review.approved", data: {} })] }, { content: "fixed" }],
          extra: { triggers: routeOn("changes_requested") },
        },
        shipper: { triggers: [], turns: [{ content: "shipped" }], extra: { triggers: routeOn("approve") } },
      },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report).toMatchObject({ status: "succeeded", reason: "goal_reached" });
    expect(report.invocations.map((invocation) => [invocation.agent, invocation.status, invocation.output])).toEqual([
      ["reviewer", "succeeded", { verdict: "changes_requested" }],
      ["fixer", "succeeded", null],
    ]);
    const finished = logOf(agency.directory).filter((event) => event.type === "agency.invocation.finished");
    expect(finished.map((event) => (event.data as { output: unknown }).output)).toEqual([{ verdict: "changes_requested" }, null]);
    expect(logOf(agency.directory).some((event) => event.type === "agency.needs_human")).toBe(false);
    const saved = JSON.parse(readFileSync(join(agency.directory, "agency-report.json"), "utf8")) as typeof report;
    expect(saved.invocations[0]!.output).toEqual({ verdict: "changes_requested" });
  });
});

describe("output_schema and when in agent files", () => {
  it("a schema that is not a JSON Schema, or a when that is not a condition, is named with its field (exit 2)", async () => {
    await using directory = temporaryDirectory();
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        reviewer: { triggers: ["task.ready"], turns: [], extra: { output_schema: { type: "objekt", required: "verdict" } } },
        fixer: { triggers: [], turns: [], extra: { triggers: [{ event: "agency.invocation.finished", when: { "output.verdict": { not: "a scalar" } } }] } },
      },
    });
    const error = await loadAgency(agencyFile).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AgencyFileError);
    const problems = (error as AgencyFileError).problems.map((problem) => [problem.file.split("/").at(-1), problem.field]);
    expect(problems).toContainEqual(["reviewer.yaml", "agent.output_schema"]);
    expect(problems).toContainEqual(["fixer.yaml", expect.stringMatching(/^agent\.triggers\.0\.when/)]);
    expect(outputSchemaProblems(VERDICT_SCHEMA)).toEqual([]);
  });

  it("judges the whole answer or one ```json block; names what is wrong", () => {
    const verdict = new StructuredOutput(VERDICT_SCHEMA);
    expect(verdict.check(' {"verdict": "approve"} ')).toEqual({ valid: true, output: { verdict: "approve" } });
    expect(verdict.check('Done.\n```json\n{"verdict": "approve"}\n```')).toEqual({ valid: true, output: { verdict: "approve" } });
    expect(verdict.check('```json\n{"verdict": "approve"}\n```\n```json\n{}\n```')).toEqual({
      valid: false,
      errors: ["the final answer has 2 ```json blocks; give exactly one"],
    });
    expect(verdict.check("[1]")).toEqual({ valid: false, errors: ["the final answer is JSON but not an object (it is an array)"] });
    expect(verdict.check('{"verdict": ')).toMatchObject({ valid: false, errors: [expect.stringContaining("does not parse")] });
    expect(verdict.check("{}")).toEqual({ valid: false, errors: ["the object must have required property 'verdict'"] });
    expect(verdict.check(null)).toMatchObject({ valid: false });
    // The output must fit in agency.invocation.finished (16 KiB of data with the other fields).
    expect(verdict.check(JSON.stringify({ verdict: "approve", notes: "x".repeat(MAX_OUTPUT_BYTES) }))).toEqual({
      valid: false,
      errors: [`the object is ${MAX_OUTPUT_BYTES + 32} bytes of JSON, over the ${MAX_OUTPUT_BYTES}-byte limit; shorten it`],
    });
    // Two agents may give schemas the same $id: each is judged by its own.
    const sameId = (required: string) => new StructuredOutput({ $id: "https://example.com/verdict", type: "object", required: [required] });
    expect([sameId("a").check('{"a": 1}').valid, sameId("b").check('{"a": 1}').valid]).toEqual([true, false]);
    // format is an annotation: an email-shaped schema compiles and does not judge the text's shape.
    expect(new StructuredOutput({ type: "object", properties: { to: { type: "string", format: "email" } } }).check('{"to": "nobody"}').valid).toBe(true);
  });

  it("a trigger's when: every dotted path must hold, a list is one of, an absent path holds for nothing", () => {
    const agent = {
      triggers: ["agency.invocation.finished"],
      triggerRules: [{ event: "agency.invocation.finished", when: { agent: "reviewer", "output.verdict": ["changes_requested", null] } }],
    };
    const finished = (data: unknown) => ({ type: "agency.invocation.finished", data });
    expect(triggeredBy(agent, finished({ agent: "reviewer", output: { verdict: "changes_requested" } }))).toBe(true);
    expect(triggeredBy(agent, finished({ agent: "reviewer", output: { verdict: null } }))).toBe(true);
    expect(triggeredBy(agent, finished({ agent: "reviewer", output: { verdict: "approve" } }))).toBe(false);
    expect(triggeredBy(agent, finished({ agent: "coder", output: { verdict: "changes_requested" } }))).toBe(false);
    expect(triggeredBy(agent, finished({ agent: "reviewer", output: null }))).toBe(false);
    expect(triggeredBy(agent, finished({ agent: "reviewer" }))).toBe(false);
    expect(triggeredBy(agent, { type: "agency.needs_human", data: { agent: "reviewer", output: { verdict: "changes_requested" } } })).toBe(false);
    // Records written before conditions existed have only the patterns.
    expect(triggeredBy({ triggers: ["task.*"] }, { type: "task.ready", data: undefined })).toBe(true);
  });
});
