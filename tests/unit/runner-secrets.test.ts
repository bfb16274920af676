/**
 * Issue 20 item 5: every credential the runner process reads is one of the
 * run's secrets (not only OPENAI_API_KEY); OpenAI keys with hyphen-separated
 * parts are credential shapes; a literal secret printed base64-, hex- or
 * percent-encoded is redacted too.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Redactor, redactorFor } from "../../src/redaction/redactor.js";
import { credentialsInUrl } from "../../src/redaction/runner-secrets.js";
import { createRunner } from "../../src/runner/runner.js";
import { HostDirectorySandboxProvider } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { fakeTierEnvironment, toolCall, writeScriptedTask } from "../helpers/fake-runner.js";

/** Values built from parts, so no credential-shaped literal sits in this file (the repository-wide redaction test reads it). */
const part = (...parts: string[]) => parts.join("");
const ANTHROPIC_KEY = part("anthropic", "-literal-", "Qx81mZ");
const GATEWAY_PASSWORD = part("gw", "Pass", "w0rd93");
const NATS_TOKEN = part("nats", "Tok", "en4471");
const DB_PASSWORD = part("hunter", "2-", "Vault!", "x9");

/** Every file of the run directory, as text. */
function runRecords(directory: string): string {
  return readdirSync(directory, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => readFileSync(join(entry.parentPath, entry.name), "latin1"))
    .join("\n");
}

describe("the credentials a run keeps out of its records", () => {
  it("are the runner's own too: a gateway error quoting ANTHROPIC_API_KEY is redacted in report.json and events.jsonl", async () => {
    const gateway = createServer((request, response) => {
      request.resume();
      response.writeHead(401, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          type: "error",
          error: {
            type: "authentication_error",
            message: `invalid x-api-key: ${String(request.headers["x-api-key"] ?? request.headers.authorization).replace(/^Bearer /, "")}`,
          },
        }),
      );
    });
    await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
    try {
      await using directory = temporaryDirectory();
      await using home = temporaryDirectory("agent-runner-fake-home-");
      const environment = {
        ...fakeTierEnvironment(home.path),
        ANTHROPIC_API_KEY: ANTHROPIC_KEY,
        ANTHROPIC_MODEL: "claude-test",
        ANTHROPIC_BASE_URL: `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`,
      };
      await using runner = await createRunner({ home: home.path, sandboxProvider: new HostDirectorySandboxProvider(), environment });
      const { task } = writeScriptedTask(directory.path, { script: { turns: [] } });
      writeFileSync(task, JSON.stringify({ ...JSON.parse(readFileSync(task, "utf8")), model: { provider: "anthropic", max_retries: 0 } }));
      const run = await runner.start(task);
      const report = await run.result;
      expect(report.status).toBe("error");
      expect(report.error).toContain("invalid x-api-key: [REDACTED]");
      const records = runRecords(run.directory);
      expect(records).toContain("invalid x-api-key: [REDACTED]");
      expect(records).not.toContain(ANTHROPIC_KEY);
    } finally {
      await new Promise((resolve) => gateway.close(resolve));
    }
  });

  it("include credentials the runner reads under secret-like names and inside base URLs, and encoded secret_env values", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory("agent-runner-fake-home-");
    const environment = {
      ...fakeTierEnvironment(home.path),
      NATS_TOKEN,
      OPENAI_BASE_URL: `https://gateway-user:${GATEWAY_PASSWORD}@gateway.example.com/v1`,
      DB_PASSWORD,
    };
    const printed = [
      `token ${NATS_TOKEN}`,
      `gateway ${GATEWAY_PASSWORD}`,
      `base64 ${Buffer.from(`user:${DB_PASSWORD}`).toString("base64")}`,
      `hex ${Buffer.from(DB_PASSWORD).toString("hex")}`,
      `url https://db.example.com/?p=${encodeURIComponent(DB_PASSWORD)}`,
    ].join("\n");
    await using runner = await createRunner({
      home: home.path,
      sandboxProvider: new HostDirectorySandboxProvider({ exec: async () => ({ stdout: printed }) }),
      environment,
    });
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("run_shell", { command: "print-them" })] }, { content: "Done." }] },
      task: { sandbox: { secret_env: ["DB_PASSWORD"] } },
    });
    const run = await runner.start(task);
    await run.result;
    const records = runRecords(run.directory);
    expect(records).toContain("token [REDACTED]");
    for (const secret of [NATS_TOKEN, GATEWAY_PASSWORD, DB_PASSWORD]) expect(records).not.toContain(secret);
    expect(records).not.toContain(Buffer.from(DB_PASSWORD).toString("hex"));
    expect(records).not.toContain(encodeURIComponent(DB_PASSWORD));
    expect(records).not.toContain(Buffer.from(`user:${DB_PASSWORD}`).toString("base64").slice(8, 20));
  });

  it("reads a URL's password, user and credential-named query values, not its other parameters", () => {
    expect(credentialsInUrl(`https://u%40x:${GATEWAY_PASSWORD}@gw.example.com/v1?api-version=2024-02-01&api-key=${NATS_TOKEN}`).sort()).toEqual(
      [`u%40x:${GATEWAY_PASSWORD}`, "u%40x", "u@x", GATEWAY_PASSWORD, NATS_TOKEN].sort(),
    );
    expect(credentialsInUrl("not a url")).toEqual([]);
    const redactor = redactorFor({ sandbox: { secret_env: [] }, model: { base_url: `https://gw.example.com/v1?key=${NATS_TOKEN}` } }, { PATH: "/usr/bin" });
    expect(redactor.redact(`key=${NATS_TOKEN} /usr/bin`)).toBe("key=[REDACTED] /usr/bin");
  });
});

describe("encoded literal secrets", () => {
  const redactor = new Redactor([{ name: "DB_PASSWORD", value: DB_PASSWORD }]);

  it.each([0, 1, 2, 3, 4, 5])("finds base64 and base64url of a value %i bytes into the encoded text", (offset) => {
    const plain = Buffer.concat([Buffer.from("p".repeat(offset)), Buffer.from(`${DB_PASSWORD}?>~ end`)]);
    for (const encoded of [plain.toString("base64"), plain.toString("base64url")]) {
      const redacted = redactor.redact(`data: ${encoded}`);
      expect(redacted).toContain("[REDACTED]");
      // At most two characters at either end are shared with the bytes around the secret.
      expect(Buffer.from(redacted.replace(/.*\[REDACTED\]/, ""), "base64").toString("latin1")).not.toContain(DB_PASSWORD.slice(-4));
    }
  });

  it("finds hex in either case and percent-encoding, whole or byte by byte", () => {
    const hex = Buffer.from(DB_PASSWORD).toString("hex");
    const everyByte = [...Buffer.from(DB_PASSWORD)].map((byte) => `%${byte.toString(16).toUpperCase()}`).join("");
    for (const text of [hex, hex.toUpperCase(), encodeURIComponent(DB_PASSWORD), everyByte]) expect(redactor.redact(`x ${text} y`)).toBe("x [REDACTED] y");
  });
});

describe("OpenAI keys with hyphen-separated parts", () => {
  const redactor = new Redactor();
  const random = (length: number, seed: number) => Array.from({ length }, (_, index) => "aB3dE5gH7jK9mN1pQ2sT4vX6zC8"[(index * 7 + seed) % 27]).join("");

  it.each([
    ["service account, parts", part("sk-svcacct-", random(8, 1), "-", random(8, 2), "-", random(24, 3))],
    ["admin, parts", part("sk-admin-", random(12, 4), "-", random(40, 5))],
    ["a named key with parts", part("sk-", "my-service-", random(32, 6))],
    ["groups of eight", part("sk-", random(8, 7), "-", random(8, 8), "-", random(8, 9), "-", random(8, 10))],
    ["legacy then a part", part("sk-", random(48, 11), "-", random(10, 12))],
  ])("%s: whole", (_name, key) => {
    expect(redactor.redact(`OPENAI: ${key} end`)).toBe("OPENAI: [REDACTED:openai-key] end");
  });

  it("leaves words joined by hyphens alone", () => {
    const text = "pip install sk-learn-0-24-documentation; see sk-learn-user-guide-2024-edition and sk-one-two-three";
    expect(redactor.redact(text)).toBe(text);
  });
});
