/**
 * OpenTelemetry export of an agency's trace (issue 22 item 8), opt-in with
 * OTEL_EXPORTER_OTLP_ENDPOINT: an in-process OTLP/HTTP receiver on loopback
 * (the exporter's JSON encoding) gets the GenAI spans, whose tree matches the
 * agency's events; no message content unless
 * OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { otlpReceiver } from "../helpers/otlp-receiver.js";
import { eventsFile, fakeRunner, fakeShell, writeScriptedTask } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { toolCall } from "../helpers/runner-cli.js";
import { fakeAgencyRunner, writeAgency } from "../helpers/agency-fixture.js";
import { busLog, pipelineAgents } from "../helpers/agency-trace-fixture.js";
import { AgencyDirectory } from "../../src/agency/agency-directory.js";
import { invocationSpanId, workflowSpanId } from "../../src/agency/agency-event.js";
import { exportRunTrace } from "../../src/agency/trace/otlp-export.js";
import { parseTraceparent, runSpanId } from "../../src/events/trace-context.js";

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("the OTLP export of an agency's trace", () => {
  it("sends invoke_workflow → invoke_agent → chat / execute_tool spans whose parents follow the agency's events, no content by default", async () => {
    const receiver = await otlpReceiver();
    try {
      vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url);
      vi.stubEnv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=agency%20one");
      vi.stubEnv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "");
      await using directory = temporaryDirectory();
      await using fake = await fakeAgencyRunner({ exec: fakeShell() });
      const { agencyFile } = writeAgency(directory.path, { files: { "calc.txt": "wrong\n" }, agents: pipelineAgents() });
      const agency = await fake.runner.agency(agencyFile);
      const report = await agency.result;
      expect(report.status).toBe("succeeded");
      // Sent before the result resolved: nothing to wait for.
      const traceId = AgencyDirectory.existing(fake.home, agency.id).readRecord().trace_id;
      const { spans } = receiver;
      expect(receiver.headers[0]).toMatchObject({ path: "/v1/traces", "x-team": "agency one", "content-type": "application/json" });
      expect(new Set(spans.map((span) => span.traceId))).toEqual(new Set([traceId]));
      expect(spans.map((span) => span.name).sort()).toEqual(
        [
          "invoke_workflow test-agency",
          "invoke_agent coder",
          "invoke_agent reviewer",
          ...Array(6).fill("chat scripted"),
          "execute_tool write_file",
          "execute_tool emit_event",
          "execute_tool read_file",
          "execute_tool emit_event",
        ].sort(),
      );
      const byId = new Map(spans.map((span) => [span.spanId, span]));
      const workflow = spans.find((span) => span.name.startsWith("invoke_workflow"))!;
      expect(workflow.spanId).toBe(workflowSpanId(agency.id));
      expect(workflow.parentSpanId ?? "").toBe("");
      expect(workflow.attributes).toMatchObject({ "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "test-agency" });
      const [coderInvocation, reviewerInvocation] = report.invocations;
      const coder = byId.get(invocationSpanId(coderInvocation!.invocation_id))!;
      const reviewer = byId.get(invocationSpanId(reviewerInvocation!.invocation_id))!;
      // The coder was triggered by the start event (produced in the workflow's span); the reviewer by the event the coder's emit_event call produced.
      expect(coder.parentSpanId).toBe(workflow.spanId);
      const coderEmit = spans.find((span) => span.name === "execute_tool emit_event" && span.parentSpanId === coder.spanId)!;
      expect(reviewer.parentSpanId).toBe(coderEmit.spanId);
      const log = await busLog(agency.directory);
      const codeReady = log.find((stored) => stored.event.type === "code.ready")!.event;
      expect(parseTraceparent(codeReady.traceparent)?.spanId).toBe(coderEmit.spanId);
      expect(coderEmit.events.map((event) => event.name)).toEqual(["code.ready"]);
      expect(coderEmit.events[0]!.attributes).toMatchObject({ "event.id": codeReady.id, "event.hops": 1 });
      expect(workflow.events.map((event) => event.name)).toEqual(["task.ready"]);
      expect(coder.attributes).toMatchObject({
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "coder",
        "gen_ai.provider.name": "scripted",
        "gen_ai.conversation.id": coderInvocation!.run_id,
        "agent_runner.status": "succeeded",
      });
      const chats = spans.filter((span) => span.name === "chat scripted" && span.parentSpanId === coder.spanId);
      expect(chats).toHaveLength(3);
      for (const chat of chats) {
        expect(chat.kind).toBe(3); // SPAN_KIND_CLIENT in OTLP's numbering
        expect(chat.attributes).toMatchObject({ "gen_ai.operation.name": "chat", "gen_ai.agent.name": "coder" });
        expect(chat.attributes["gen_ai.usage.input_tokens"]).toEqual(expect.any(Number));
        expect(chat.attributes).not.toHaveProperty("gen_ai.output.messages");
      }
      const write = spans.find((span) => span.name === "execute_tool write_file")!;
      expect(write.parentSpanId).toBe(coder.spanId);
      expect(write.attributes).toMatchObject({ "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "write_file", "gen_ai.tool.type": "function" });
      for (const span of spans) {
        expect(span.attributes).not.toHaveProperty("gen_ai.tool.call.arguments");
        expect(span.attributes).not.toHaveProperty("gen_ai.tool.call.result");
        // Every parent is in the export: one connected tree.
        if (span.parentSpanId) expect(byId.has(span.parentSpanId)).toBe(true);
      }
    } finally {
      receiver.server.closeAllConnections();
      await new Promise((resolve) => receiver.server.close(resolve));
    }
  });

  it("with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true carries tool arguments, results and answers, redacted by the run's redactor", async () => {
    const receiver = await otlpReceiver();
    try {
      vi.stubEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", `${receiver.url}/custom/traces`);
      vi.stubEnv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
      const token = `ghp_${"A1b2C3d4E5".repeat(4)}`;
      await using directory = temporaryDirectory();
      await using fake = await fakeAgencyRunner({ exec: fakeShell() });
      const { agencyFile } = writeAgency(directory.path, {
        files: { "calc.txt": "wrong\n" },
        agents: {
          solo: {
            triggers: ["task.ready"],
            capabilities: ["read_file", "write_file"],
            emits: ["review.approved"],
            turns: [
              { tool_calls: [toolCall("write_file", { path: "calc.txt", content: `token ${token}\n` })] },
              { tool_calls: [toolCall("emit_event", { type: "review.approved", data: {} })] },
              { content: "all done" },
            ],
          },
        },
      });
      const report = await (await fake.runner.agency(agencyFile)).result;
      expect(report.status).toBe("succeeded");
      expect(receiver.headers[0]).toMatchObject({ path: "/custom/traces" });
      const write = receiver.spans.find((span) => span.name === "execute_tool write_file")!;
      expect(write.attributes["gen_ai.tool.call.arguments"]).toEqual(expect.stringContaining("calc.txt"));
      expect(write.attributes["gen_ai.tool.call.arguments"]).toEqual(expect.stringContaining("[REDACTED"));
      expect(JSON.stringify(receiver.spans)).not.toContain(token);
      expect(write.attributes["gen_ai.tool.call.result"]).toEqual(expect.any(String));
      const answers = receiver.spans.map((span) => span.attributes["gen_ai.output.messages"]).filter((value) => value !== undefined);
      expect(answers).toContain(JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: "all done" }] }]));
    } finally {
      receiver.server.closeAllConnections();
      await new Promise((resolve) => receiver.server.close(resolve));
    }
  });

  it("sends nothing without the variables", async () => {
    const receiver = await otlpReceiver();
    try {
      vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "");
      vi.stubEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "");
      await using directory = temporaryDirectory();
      await using fake = await fakeAgencyRunner({ exec: fakeShell() });
      const { agencyFile } = writeAgency(directory.path, { files: { "calc.txt": "wrong\n" }, agents: pipelineAgents() });
      const report = await (await fake.runner.agency(agencyFile)).result;
      expect(report.status).toBe("succeeded");
      expect(receiver.headers).toEqual([]);
    } finally {
      receiver.server.closeAllConnections();
      await new Promise((resolve) => receiver.server.close(resolve));
    }
  });

  it("sends a plain run's trace (runner exec): invoke_agent {task} with its chat and execute_tool spans, in the run's trace", async () => {
    const receiver = await otlpReceiver();
    try {
      vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url);
      vi.stubEnv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "");
      await using directory = temporaryDirectory();
      await using fake = await fakeRunner({ exec: fakeShell() });
      const { task } = writeScriptedTask(directory.path, {
        script: { turns: [{ tool_calls: [toolCall("run_shell", { command: "echo hi" })] }, { content: "done" }] },
        task: { name: "plain" },
      });
      const run = await fake.runner.start(task);
      const report = await run.result;
      expect(report.status).toBe("succeeded");
      expect(await exportRunTrace({ directory: run.directory, report, model: { provider: "scripted" } })).toBeNull();
      const { spans } = receiver;
      expect(spans.map((span) => span.name)).toEqual(["invoke_agent plain", "chat scripted", "execute_tool run_shell", "chat scripted"]);
      const root = spans[0]!;
      expect(root.parentSpanId ?? "").toBe("");
      expect(root.spanId).toBe(runSpanId(report.run_id, null));
      expect(root.attributes).toMatchObject({
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": report.run_id,
        "agent_runner.status": "succeeded",
      });
      for (const span of spans) expect(span.traceId).toBe(report.trace_id);
      for (const span of spans.slice(1)) expect(span.parentSpanId).toBe(root.spanId);
      // The span ids are the ones events.jsonl names.
      const shell = eventsFile(run.directory).find((envelope) => envelope.type.includes("tool_call.started"))!;
      expect(parseTraceparent(shell.traceparent)?.spanId).toBe(spans[2]!.spanId);
    } finally {
      receiver.server.closeAllConnections();
      await new Promise((resolve) => receiver.server.close(resolve));
    }
  });

  it("does not fail the work when the collector is down: the failure comes back as a message", async () => {
    const receiver = await otlpReceiver();
    const url = receiver.url;
    receiver.server.closeAllConnections();
    await new Promise((resolve) => receiver.server.close(resolve));
    vi.stubEnv("OTEL_EXPORTER_OTLP_ENDPOINT", url);
    // The exporter retries a refused connection until its timeout (default 10 s).
    vi.stubEnv("OTEL_EXPORTER_OTLP_TIMEOUT", "500");
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: "done" }] }, task: { name: "plain" } });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(await exportRunTrace({ directory: run.directory, report, model: { provider: "scripted" } })).toMatch(/the OTLP export of 2 spans failed/);
  });
});
