/**
 * RunEmbedding.checkFinalAnswer through the Runner seam (issue 22 item 4): a
 * rejected answer ends the run `failed` / `output_invalid` after its one
 * correction turn, and a run resumed right after its agent answered has that
 * answer judged, never taken unchecked.
 */
import { describe, expect, it } from "vitest";
import { StructuredOutput } from "../../../src/agency/guards/structured-output.js";
import { CancelledError } from "../../../src/errors.js";
import type { ModelClient } from "../../../src/model/model-client.js";
import { createRunner } from "../../../src/runner/runner.js";
import { HostDirectorySandboxProvider } from "../../../src/sandbox/fake/host-directory-sandbox.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { StrictScriptedModel } from "../../helpers/strict-scripted-model.js";
import { fakeTierEnvironment, writeScriptedTask } from "../../helpers/fake-runner.js";

const VERDICT = new StructuredOutput({ type: "object", required: ["verdict"], properties: { verdict: { enum: ["approve", "changes_requested"] } } });

async function scriptedRunner(home: string, model: StrictScriptedModel) {
  const client: ModelClient = { complete: (request) => model.complete(request) };
  return createRunner({
    home,
    sandboxProvider: new HostDirectorySandboxProvider(),
    environment: fakeTierEnvironment(home),
    openModel: async () => ({ client, close: async () => undefined }),
  });
}

describe("a run whose final answer is checked (embedding.checkFinalAnswer)", () => {
  it("ends failed/output_invalid after one correction turn", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, { script: { turns: [] } });
    const model = new StrictScriptedModel([{ content: "fine" }, { content: '{"verdict": "fine"}' }]);
    const runner = await scriptedRunner(home.path, model);
    try {
      const report = await (await runner.start(task, { embedding: { checkFinalAnswer: VERDICT.checkFinalAnswer } })).result;
      model.assertDone();
      expect(report).toMatchObject({ status: "failed", reason: "output_invalid", final_message: '{"verdict": "fine"}' });
    } finally {
      await runner.close();
    }
  });

  it("a run resumed after its agent answered judges that answer (a correction turn), not delivers it unchecked", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, { script: { turns: [] } });
    const model = new StrictScriptedModel([{ content: "fine" }, { content: '{"verdict": "approve"}' }]);
    const runner = await scriptedRunner(home.path, model);
    try {
      // The first attempt stops between the answer (journaled) and its judgement: the check fails.
      const failing = (): string[] | null => {
        throw new Error("the check could not run");
      };
      const first = await (await runner.start(task, { embedding: { checkFinalAnswer: failing } })).result;
      expect(first.status).toBe("error");
      expect(model.requests).toHaveLength(1);
      const resumed = await (await runner.resume(first.run_id, { embedding: { checkFinalAnswer: VERDICT.checkFinalAnswer } })).result;
      model.assertDone();
      expect(resumed).toMatchObject({ status: "succeeded", final_message: '{"verdict": "approve"}' });
      expect(model.requests[1]!.messages.at(-1)).toMatchObject({ role: "user", content: expect.stringContaining("Your final answer was rejected") });
    } finally {
      await runner.close();
    }
  });

  it("a run cancelled after its correction turn and resumed gets no second one", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, { script: { turns: [] } });
    const cancel = new AbortController();
    const model = new StrictScriptedModel([
      { content: "fine" },
      // The corrected answer is being written when the run is cancelled.
      () => {
        cancel.abort();
        throw new CancelledError();
      },
      { content: '{"verdict": "fine"}' },
    ]);
    const runner = await scriptedRunner(home.path, model);
    try {
      const embedding = { checkFinalAnswer: VERDICT.checkFinalAnswer };
      const first = await (await runner.start(task, { embedding, signal: cancel.signal })).result;
      expect(first.status).toBe("cancelled");
      const resumed = await (await runner.resume(first.run_id, { embedding })).result;
      model.assertDone();
      expect(resumed).toMatchObject({ status: "failed", reason: "output_invalid" });
    } finally {
      await runner.close();
    }
  });

  it("refuses a checkFinalAnswer that is not a function, naming the field", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, { script: { turns: [] } });
    const runner = await scriptedRunner(home.path, new StrictScriptedModel([]));
    try {
      const refused = runner.start(task, { embedding: { checkFinalAnswer: "verdict" as unknown as () => null } });
      await expect(refused).rejects.toThrow(/embedding\.checkFinalAnswer: expected a function/);
    } finally {
      await runner.close();
    }
  });
});
