/**
 * `runner serve` as a user starts it (issue 23): it prints the URL with its
 * token, answers /v1/health without one and nothing else without one,
 * refuses a non-loopback address without --token-file (exit 2, naming TLS),
 * and stops cleanly on SIGINT.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { runCli, startCli, waitFor } from "../helpers/runner-cli.js";

describe("runner serve (the CLI)", () => {
  it("prints the URL with its token; the token opens the API; SIGINT stops it with exit 0", async () => {
    await using home = temporaryDirectory();
    const server = startCli(["serve", "--port", "0", "--tasks-root", home.path], { RUNNER_HOME: home.path });
    try {
      const line = await waitFor("the URL", () => /runner serve: (http:\/\/127\.0\.0\.1:\d+)\/\?token=(\S+)/.exec(server.output().stdout), {
        timeoutMs: 20_000,
        process: server,
      });
      const [, url, token] = line;
      expect((await fetch(`${url}/v1/health`)).status).toBe(200);
      expect((await fetch(`${url}/v1/runs`)).status).toBe(401);
      const runs = await fetch(`${url}/v1/runs`, { headers: { authorization: `Bearer ${token}` } });
      expect(await runs.json()).toEqual({ runs: [], next_cursor: null });
    } finally {
      server.child.kill("SIGINT");
    }
    expect((await server.result).code).toBe(0);
  });

  it("refuses a non-loopback address without --token-file; takes the token from the file", async () => {
    await using home = temporaryDirectory();
    const refused = await runCli(["serve", "--host", "0.0.0.0", "--port", "0"], { RUNNER_HOME: home.path });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("--token-file");
    expect(refused.stderr).toContain("TLS");
    const file = join(home.path, "token");
    writeFileSync(file, "a-token-from-a-file-0123456789\n");
    const server = startCli(["serve", "--port", "0", "--token-file", file], { RUNNER_HOME: home.path });
    try {
      const [, url] = await waitFor("the URL", () => /runner serve: (http:\S+)\/\?token=a-token-from-a-file-0123456789/.exec(server.output().stdout), {
        timeoutMs: 20_000,
        process: server,
      });
      expect((await fetch(`${url}/v1/approvals`, { headers: { authorization: "Bearer a-token-from-a-file-0123456789" } })).status).toBe(200);
    } finally {
      server.child.kill("SIGINT");
    }
    expect((await server.result).code).toBe(0);
  });
});
