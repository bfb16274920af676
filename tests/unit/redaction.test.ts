import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CloudEventLog } from "../../src/events/cloud-event-log.js";
import { addLogRedactor, createLogger } from "../../src/logging/logger.js";
import { MIN_SECRET_LENGTH, REDACTED, Redactor, redactorFor } from "../../src/redaction/redactor.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

// Token-shaped test values are assembled from parts so that no complete
// credential-looking literal sits in the source (secret scanners).
const body = (length: number, alphabet = "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0z") => {
  let out = "";
  for (let i = 0; out.length < length; i++) out += alphabet[(i * 7) % alphabet.length];
  return out;
};
const tokens = {
  openaiLegacy: "sk-" + body(48),
  openaiProject: "sk-" + "proj-" + body(40) + "_" + body(20, "Ab1-Cd2_Ef3"),
  githubPat: "ghp" + "_" + body(36),
  githubOauth: "gho" + "_" + body(36),
  githubUser: "ghu" + "_" + body(36),
  githubServer: "ghs" + "_" + body(36),
  githubRefresh: "ghr" + "_" + body(36),
  githubFineGrained: "github" + "_pat_" + body(22) + "_" + body(59),
  awsKey: "AKIA" + body(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
  awsTemporary: "ASIA" + body(16, "QRSTUVWXYZ234567"),
  slackBot: "xox" + "b-" + "123456789012-1234567890123-" + body(24),
  slackUser: "xox" + "p-" + "123456789012-" + body(30),
};
const privateKey = ["-----BEGIN OPENSSH PRIVATE KEY-----", body(70), body(70), "-----END OPENSSH PRIVATE KEY-----"].join("\n");

describe("Redactor: token shapes", () => {
  const redactor = new Redactor();

  it.each([
    ["openaiLegacy", "openai-key"],
    ["openaiProject", "openai-key"],
    ["githubPat", "github-token"],
    ["githubOauth", "github-token"],
    ["githubUser", "github-token"],
    ["githubServer", "github-token"],
    ["githubRefresh", "github-token"],
    ["githubFineGrained", "github-token"],
    ["awsKey", "aws-access-key-id"],
    ["awsTemporary", "aws-access-key-id"],
    ["slackBot", "slack-token"],
    ["slackUser", "slack-token"],
  ] as const)("%s → [REDACTED:%s]", (name, kind) => {
    const token = tokens[name];
    expect(redactor.redact(`export TOKEN=${token}; echo done`)).toBe(`export TOKEN=[REDACTED:${kind}]; echo done`);
    expect(redactor.redact(`"${token}"`)).toBe(`"[REDACTED:${kind}]"`);
  });

  it("keeps the word Bearer and redacts the token after it", () => {
    const jwt = `eyJhbGciOiJIUzI1NiJ9.${body(30)}.${body(43)}`;
    expect(redactor.redact(`Authorization: Bearer ${jwt}\r\n`)).toBe("Authorization: Bearer [REDACTED:bearer-token]\r\n");
    expect(redactor.redact(`authorization: bearer ${body(32)}==`)).toBe("authorization: bearer [REDACTED:bearer-token]");
  });

  it("redacts a private key block, and a truncated one to the end of the text or string", () => {
    expect(redactor.redact(`key:\n${privateKey}\nnext line`)).toBe("key:\n[REDACTED:private-key]\nnext line");
    expect(redactor.redact("-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + body(200))).toBe("[REDACTED:private-key]");
    const json = JSON.stringify({ preview: "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE" + body(40), next: 1 });
    const redacted = redactor.redact(json);
    expect(JSON.parse(redacted)).toEqual({ preview: "[REDACTED:private-key]", next: 1 });
  });

  it("leaves ordinary code and text alone", () => {
    const text = [
      "task-runner skip sk-learn risk-assessment-for-the-whole-project-team ask-for-review-before-merging-anything",
      "commit 3f2a9c1e5b7d4a8f9e0b1c2d3e4f5a6b7c8d9e0f (HEAD -> runner/20240101-abc)",
      "const skipped = tasks.filter((task) => task.disk-usage > limit); // sk- prefix",
      "Bearer",
      "Use a Bearer token in the Authorization header; Bearer authentication-required.",
      "ghp_short gho_ github_pat_ AKIA AKIAlowercase0000000 xoxb- xoxo-gossip",
      "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
      "-----BEGIN PUBLIC KEY-----",
      "550e8400-e29b-41d4-a716-446655440000 sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
      "def test_median(): assert median([3, 1, 2]) == 2",
    ].join("\n");
    expect(new Redactor(["not-in-the-text-at-all"]).redact(text)).toBe(text);
  });

  it("can do without the shapes", () => {
    const redactor = new Redactor(["my-secret-value"], { patterns: false });
    expect(redactor.redact(`${tokens.githubPat} my-secret-value`)).toBe(`${tokens.githubPat} ${REDACTED}`);
    expect(new Redactor([], { patterns: false }).isEmpty).toBe(true);
    expect(new Redactor([]).isEmpty).toBe(false);
  });
});

describe("Redactor: literal values", () => {
  it("redacts every occurrence", () => {
    const redactor = new Redactor(["hunter2-password"]);
    expect(redactor.redact("a hunter2-password b hunter2-passwordhunter2-password")).toBe(`a ${REDACTED} b ${REDACTED}`);
  });

  it("finds values with quotes and backslashes when they appear JSON-escaped, once or twice", () => {
    const secret = 'pa"ss\\word\nline2';
    const redactor = new Redactor([secret]);
    expect(redactor.redact(`raw ${secret} raw`)).toBe(`raw ${REDACTED} raw`);
    const once = JSON.stringify({ command: `curl -u user:${secret} https://example.org` });
    expect(once).not.toContain(secret);
    expect(JSON.parse(redactor.redact(once))).toEqual({ command: `curl -u user:${REDACTED} https://example.org` });
    const twice = JSON.stringify({ arguments: once });
    expect(JSON.parse(JSON.parse(redactor.redact(twice)).arguments)).toEqual({ command: `curl -u user:${REDACTED} https://example.org` });
  });

  it("redacts overlapping and nested secrets completely", () => {
    const redactor = new Redactor(["abcdefgh1234", "gh1234567890", "cdefgh"]);
    expect(redactor.redact("xx abcdefgh1234567890 yy")).toBe(`xx ${REDACTED} yy`);
    expect(redactor.redact("xx cdefgh yy abcdefgh1234")).toBe(`xx ${REDACTED} yy ${REDACTED}`);
    // a secret that contains a token shape: one span, the literal's label
    const containing = new Redactor([`prefix-${tokens.githubPat}`]);
    expect(containing.redact(`v=prefix-${tokens.githubPat}!`)).toBe(`v=${REDACTED}!`);
  });

  it(`ignores empty values and values shorter than ${MIN_SECRET_LENGTH} characters, and says which`, () => {
    const redactor = new Redactor(["", "abc", { name: "SHORT_ONE", value: "12345" }, { name: "GOOD", value: "123456" }, undefined]);
    expect(redactor.skipped).toEqual(["#1", "SHORT_ONE"]);
    expect(redactor.redact("abc 12345 123456")).toBe(`abc 12345 ${REDACTED}`);
  });

  it("also finds a value without the whitespace around it (a trailing newline from a file)", () => {
    const redactor = new Redactor(["token-from-file\n"]);
    expect(redactor.redact("echo token-from-file done")).toBe(`echo ${REDACTED} done`);
  });
});

describe("Redactor.redactDeep", () => {
  it("returns a redacted copy, walking arrays and objects, keys redacted too", () => {
    const redactor = new Redactor(["s3cret-value"]);
    const input = {
      "s3cret-value": "key stays",
      list: ["a s3cret-value", 3, null, { nested: [`Bearer ${body(20)}`] }],
      flag: true,
      count: 7,
    };
    const output = redactor.redactDeep(input);
    expect(output).toEqual({
      [REDACTED]: "key stays",
      list: [`a ${REDACTED}`, 3, null, { nested: ["Bearer [REDACTED:bearer-token]"] }],
      flag: true,
      count: 7,
    });
    expect(input.list[0]).toBe("a s3cret-value");
    expect(output).not.toBe(input);
    expect(redactor.redactDeep("s3cret-value")).toBe(REDACTED);
    expect(redactor.redactDeep(42)).toBe(42);
  });

  it("turns errors into plain objects with their text redacted, and survives cycles", () => {
    const redactor = new Redactor(["s3cret-value"]);
    const error = new Error("failed with s3cret-value");
    const copy = redactor.redactDeep({ error }) as { error: { message: string; stack: string } };
    expect(copy.error.message).toBe(`failed with ${REDACTED}`);
    expect(copy.error.stack).not.toContain("s3cret-value");
    const cyclic: Record<string, unknown> = { text: "s3cret-value" };
    cyclic.self = cyclic;
    const cyclicCopy = redactor.redactDeep(cyclic);
    expect(cyclicCopy.text).toBe(REDACTED);
    expect(cyclicCopy.self).toBe(cyclicCopy);
  });
});

describe("Redactor: literal values in any letter case", () => {
  it("finds a secret_env value lower-cased, as the egress proxy and every URL parser record host names", () => {
    const secret = "AbCdEf0123456789XyZ";
    const redactor = redactorFor({ sandbox: { secret_env: ["MY_TOKEN"] } }, { MY_TOKEN: secret });
    const host = new URL(`http://${secret}.exfil.test/`).hostname;
    expect(host).toBe(secret.toLowerCase() + ".exfil.test");
    expect(redactor.redact(`GET ${host}:80`)).toBe(`GET ${REDACTED}.exfil.test:80`);
    expect(redactor.redact(secret.toUpperCase())).toBe(REDACTED);
  });

  it("redacts keys, so report.json's per-host network counts keep no secret", () => {
    const secret = "AbCdEf0123456789XyZ";
    const redactor = new Redactor([secret]);
    const network = { [`${secret.toLowerCase()}.exfil.test:80`]: { allowed: 0, denied: 1 }, "packages.example.com:443": { allowed: 2, denied: 0 } };
    expect(redactor.redactDeep({ network })).toEqual({
      network: { [`${REDACTED}.exfil.test:80`]: { allowed: 0, denied: 1 }, "packages.example.com:443": { allowed: 2, denied: 0 } },
    });
  });
});

describe("redactorFor", () => {
  it("collects OPENAI_API_KEY and the task's secret_env values from the environment", () => {
    const redactor = redactorFor(
      { sandbox: { secret_env: ["DB_PASSWORD", "MISSING", "PIN"] } },
      { OPENAI_API_KEY: "openai-key-value-1", DB_PASSWORD: "correct horse battery", PIN: "1234", HOME: "/home/someone" },
    );
    expect(redactor.redact("openai-key-value-1 correct horse battery 1234 /home/someone")).toBe(`${REDACTED} ${REDACTED} 1234 /home/someone`);
    expect(redactor.skipped).toEqual(["PIN"]);
  });
});

describe("CloudEventLog with a redactor", () => {
  it("writes redacted event data to events.jsonl and to onEnvelope", async () => {
    await using directory = temporaryDirectory();
    const file = join(directory.path, "events.jsonl");
    const secret = 'db-pass"word';
    const log = new CloudEventLog(file, "run-1", "0".repeat(32), { redactor: new Redactor([secret]) });
    const seen: string[] = [];
    log.onEnvelope = (line) => seen.push(line);
    log.emit({
      type: "tool_call.started",
      data: { agent_id: "main", step: 1, tool_call_id: "c1", name: "run_shell", arguments: JSON.stringify({ command: `psql --password '${secret}'` }) },
    });
    log.emit({
      type: "tool_call.finished",
      data: {
        agent_id: "main",
        step: 1,
        tool_call_id: "c1",
        name: "run_shell",
        is_error: false,
        duration_ms: 5,
        result_preview: `GH_TOKEN=${tokens.githubPat}\n${secret}`,
      },
    });
    log.close();
    const lines = readFileSync(file, "utf8").trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(seen.join("")).toBe(`${lines.join("\n")}\n`);
    for (const line of lines) {
      expect(line).not.toContain("db-pass");
      expect(line).not.toContain(tokens.githubPat);
    }
    const started = JSON.parse(lines[0]!) as { data: { arguments: string } };
    expect(JSON.parse(started.data.arguments)).toEqual({ command: `psql --password '${REDACTED}'` });
    const finished = JSON.parse(lines[1]!) as { data: { result_preview: string; name: string } };
    expect(finished.data.result_preview).toBe(`GH_TOKEN=[REDACTED:github-token]\n${REDACTED}`);
    expect(finished.data.name).toBe("run_shell");
  });

  it("writes data unchanged without a redactor", async () => {
    await using directory = temporaryDirectory();
    const file = join(directory.path, "events.jsonl");
    const log = new CloudEventLog(file, "run-1", "0".repeat(32));
    log.emit({ type: "verify.started", data: { agent_id: "main", command: `echo ${tokens.githubPat}` } });
    log.close();
    expect(readFileSync(file, "utf8")).toContain(tokens.githubPat);
  });
});

describe("logger redaction", () => {
  const removals: (() => void)[] = [];
  afterEach(() => {
    for (const remove of removals.splice(0)) remove();
  });

  function capture() {
    const lines: string[] = [];
    return { lines, destination: { write: (chunk: string) => void lines.push(chunk) } };
  }

  it("redacts messages, merged objects, errors and interpolated arguments", () => {
    const { lines, destination } = capture();
    const logger = createLogger({ component: "test" }, { destination, level: "info", redactor: new Redactor(["log-secret-1"]) });
    logger.info("message with log-secret-1");
    logger.info({ detail: { output: `line\n${tokens.openaiLegacy}` }, list: ["log-secret-1"] }, "object");
    logger.warn({ err: new Error("boom: log-secret-1") }, "failed");
    logger.info("interpolated %s", "log-secret-1");
    logger.info({ apiKey: "by-key" }, "key-based redaction still applies");
    expect(lines).toHaveLength(5);
    const all = lines.join("");
    expect(all).not.toContain("log-secret-1");
    expect(all).not.toContain(tokens.openaiLegacy);
    expect(all).not.toContain("by-key");
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(parsed[0]).toMatchObject({ msg: `message with ${REDACTED}`, component: "test" });
    expect(parsed[1]).toMatchObject({ detail: { output: "line\n[REDACTED:openai-key]" }, list: [REDACTED], msg: "object" });
    expect(parsed[2]).toMatchObject({ err: { type: "Error", message: `boom: ${REDACTED}` }, msg: "failed" });
    expect(parsed[3]).toMatchObject({ msg: `interpolated ${REDACTED}` });
    expect(parsed[4]).toMatchObject({ apiKey: "[redacted]" });
    for (const line of lines) expect(line.endsWith("\n")).toBe(true);
  });

  it("applies an added run redactor to loggers created before it was added, until it is removed", () => {
    const { lines, destination } = capture();
    const logger = createLogger({}, { destination, level: "info" }).child({ part: "child" });
    logger.info("before install-secret-2");
    const remove = addLogRedactor(new Redactor(["install-secret-2"]));
    removals.push(remove);
    logger.info("after install-secret-2");
    remove();
    logger.info("removed install-secret-2");
    expect(lines[0]).toContain("install-secret-2");
    expect(lines[1]).not.toContain("install-secret-2");
    expect(JSON.parse(lines[1]!)).toMatchObject({ msg: `after ${REDACTED}`, part: "child" });
    expect(lines[2]).toContain("install-secret-2");
  });

  it("redacts every active run's secrets in every line: two runs in one process never undo each other", () => {
    const { lines, destination } = capture();
    const logger = createLogger({}, { destination, level: "info" });
    const first = addLogRedactor(new Redactor(["first-run-secret"]));
    const second = addLogRedactor(new Redactor(["second-run-secret"]));
    removals.push(first, second);
    logger.info("first-run-secret and second-run-secret");
    first();
    logger.info("second-run-secret still, first gone");
    expect(lines[0]).not.toMatch(/first-run-secret|second-run-secret/);
    expect(lines[1]).not.toContain("second-run-secret");
  });
});
