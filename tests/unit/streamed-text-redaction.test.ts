/**
 * Issue 20 item 4: the live line of the model's streamed reply is redacted
 * like the run's records, and no secret shows while it is still arriving,
 * not even its start, however the stream splits it.
 */
import { describe, expect, it } from "vitest";
import { ProgressView } from "../../src/cli/progress-view.js";
import { createRunner } from "../../src/runner/runner.js";
import { Redactor } from "../../src/redaction/redactor.js";
import { StreamedTextRedactor } from "../../src/redaction/streamed-text.js";
import { HostDirectorySandboxProvider } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { fakeShell, fakeTierEnvironment, writeScriptedTask } from "../helpers/fake-runner.js";

/** A secret_env value (built from parts: the repository-wide redaction test reads this file). */
const SECRET = ["Zq7", "tellNo1", "the", "vault", "code"].join("-");
const TOKEN = `ghp_${"a1B2c3D4e5".repeat(4)}`;

/** Everything `text` streams out in pieces of `size` characters. */
function streamed(redactor: Redactor, text: string, size: number): string {
  const stream = new StreamedTextRedactor(redactor);
  let shown = "";
  for (let index = 0; index < text.length; index += size) shown += stream.append(text.slice(index, index + size));
  return shown;
}

describe("StreamedTextRedactor", () => {
  const redactor = new Redactor([{ name: "VAULT_CODE", value: SECRET }]);
  const reply = `Found it: the code is ${SECRET}, and the token ${TOKEN} works; ${"more words follow here. ".repeat(8)}The end.`;

  it.each([1, 2, 3, 5, 8, 13])("shows nothing of a secret or a token split into pieces of %i characters", (size) => {
    const shown = streamed(redactor, reply, size);
    expect(shown).not.toContain(SECRET.slice(0, 4));
    expect(shown).not.toContain(TOKEN.slice(0, 8));
    expect(shown).toContain("[REDACTED]");
    expect(shown).toContain("[REDACTED:github-token]");
    // What shows is the start of the redacted reply, in the same words.
    expect(redactor.redact(reply).startsWith(shown)).toBe(true);
    expect(shown.length).toBeGreaterThan(100);
  });

  it("holds back a secret's start that has arrived, and lets an ordinary word through once it ends", () => {
    const stream = new StreamedTextRedactor(redactor);
    let shown = stream.append(`${"x ".repeat(40)}${SECRET.slice(0, 12)}`);
    expect(shown).not.toContain(SECRET.slice(0, 3));
    shown += stream.append(SECRET.slice(12));
    shown += stream.append(` and then ${"y ".repeat(40)}`);
    expect(shown).toContain(" [REDACTED] and then ");
    expect(shown).not.toContain(SECRET.slice(0, 3));
  });
});

describe("the streamed reply on the terminal", () => {
  it("never shows a secret_env value, whole or split across the stream's pieces", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory("agent-runner-fake-home-");
    const environment = { ...fakeTierEnvironment(home.path), VAULT_CODE: SECRET };
    await using runner = await createRunner({
      home: home.path,
      sandboxProvider: new HostDirectorySandboxProvider({ exec: fakeShell() }),
      environment,
    });
    const content = `The vault code is ${SECRET} and the token is ${TOKEN}. ${"Here is a longer explanation of what was done. ".repeat(4)}Done.`;
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ content }] },
      task: { model: { provider: "scripted", script: "./script.yaml", stream: true }, sandbox: { secret_env: ["VAULT_CODE"] } },
    });
    let output = "";
    const terminal = { isTTY: true, columns: 400, write: (chunk: string) => ((output += chunk), true) } as unknown as NodeJS.WriteStream;
    const view = new ProgressView(terminal);
    let pieces = 0;
    const run = await runner.start(task, {
      onModelText: (text) => {
        pieces += 1;
        view.showModelText(text);
      },
    });
    for await (const envelope of run.events()) view.show(envelope);
    await run.result;
    expect(pieces).toBeGreaterThan(3);
    expect(output).toContain("The vault code is [REDACTED] and the token is [REDACTED:github-token]");
    // Not in any status line drawn while it streamed (8-character pieces), nor in the finished line.
    expect(output).not.toContain(SECRET.slice(0, 4));
    expect(output).not.toContain(TOKEN.slice(0, 8));
  });
});
