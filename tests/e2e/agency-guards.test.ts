// The agency's guards end to end on real Docker (issue 22, "Done when"): examples/agency/fix-pipeline through the
// library with a reviewer asking for one change (its structured output), `confirm: [run_shell]` answered by a
// programmatic ApprovalBroker, and the trace exported as OTLP spans to an in-process OTLP/HTTP receiver on
// loopback, whose span tree matches the agency's events.
import { execFileSync } from "node:child_process";
import { appendFileSync, cpSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { invocationSpanId, workflowSpanId } from "../../src/agency/agency-event.js";
import { AgencyDirectory } from "../../src/agency/agency-directory.js";
import { createRunner } from "../../src/index.js";
import type { ApprovalRequest } from "../../src/runner/runner.js";
import { readBusLog } from "../../src/bus/read-bus-log.js";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { otlpReceiver } from "../helpers/otlp-receiver.js";

const EXAMPLE = fileURLToPath(new URL("../../examples/agency/fix-pipeline", import.meta.url));

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("the agency's guards on real Docker", () => {
  it("fix-pipeline with a gated run_shell answered by a broker: one review round, every question an event, the OTLP span tree matches the events", async () => {
    await requireDocker();
    const receiver = await otlpReceiver();
    try {
      vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url);
      await using directory = temporaryDirectory();
      await using home = temporaryDirectory();
      cpSync(EXAMPLE, directory.path, { recursive: true });
      for (const file of readdirSync(join(directory.path, "agents")))
        appendFileSync(join(directory.path, "agents", file), `  sandbox: { image: ${SANDBOX_IMAGE} }\n`);
      appendFileSync(join(directory.path, "agency.yaml"), "confirm: [run_shell]\n");
      const repo = join(directory.path, "repo");
      const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@localhost", ...args], { cwd: repo, encoding: "utf8" });
      git("init", "-q", "-b", "main");
      git("add", "-A");
      git("commit", "-qm", "initial");

      const asked: ApprovalRequest[] = [];
      const runner = await createRunner({ home: home.path });
      const agency = await runner.agency(join(directory.path, "agency.yaml"), {
        approvals: {
          request: async (approval) => {
            asked.push(approval);
            return { answer: "yes" };
          },
        },
      });
      const report = await agency.result;
      expect(report).toMatchObject({ status: "succeeded", reason: "goal_reached" });
      // The reviewer asked for one change (its structured output), then approved.
      expect(
        report.invocations.filter((invocation) => invocation.agent === "reviewer").map((invocation) => (invocation.output as { verdict: string }).verdict),
      ).toEqual(["changes_requested", "approve"]);
      expect(git("show", `agency/${agency.id}:calc.py`)).toContain("return a + b");

      // confirm: every run_shell call was asked (the tester's pytest runs at least), each question an agency event pair.
      expect(asked.length).toBeGreaterThanOrEqual(2);
      for (const approval of asked) expect(approval.question).toContain("run_shell");
      const log = [];
      for await (const stored of readBusLog(agency.directory, { follow: false })) log.push(stored.event);
      const requested = log.filter((event) => event.type === "agency.approval.requested");
      const resolved = log.filter((event) => event.type === "agency.approval.resolved");
      expect(requested).toHaveLength(asked.length);
      expect(resolved.map((event) => (event.data as { answer: string }).answer)).toEqual(asked.map(() => "yes"));

      // One trace, exported before the result resolved: a workflow span, an invoke_agent span per invocation under
      // the span that produced its event, and every parent in the export.
      const traceId = AgencyDirectory.existing(home.path, agency.id).readRecord().trace_id;
      const { spans } = receiver;
      expect(new Set(spans.map((span) => span.traceId))).toEqual(new Set([traceId]));
      const byId = new Map(spans.map((span) => [span.spanId, span]));
      const workflow = byId.get(workflowSpanId(agency.id))!;
      expect(workflow.name).toBe("invoke_workflow fix-pipeline");
      for (const invocation of report.invocations) {
        const span = byId.get(invocationSpanId(invocation.invocation_id));
        expect(span?.name, invocation.invocation_id).toBe(`invoke_agent ${invocation.agent}`);
        const served = log.find((event) => event.id === invocation.event_id)!;
        // The invocation's span hangs under the span of the event it served (its traceparent's span id).
        expect(span!.parentSpanId).toBe(served.traceparent!.split("-")[2]);
      }
      expect(spans.filter((span) => span.name === "execute_tool run_shell").length).toBeGreaterThanOrEqual(asked.length);
      for (const span of spans) if (span.parentSpanId) expect(byId.has(span.parentSpanId), span.name).toBe(true);
    } finally {
      receiver.server.closeAllConnections();
      receiver.server.close();
    }
  });
});
