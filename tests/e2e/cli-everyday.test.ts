// The everyday CLI as a user meets it (the built dist/cli/main.js, no Docker,
// no model): --version / -V, --help with examples.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { ROOT, runCli } from "../helpers/runner-cli.js";

const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

describe("runner --version and --help", () => {
  it("--version and -V print the package version and exit 0", async () => {
    await using home = temporaryDirectory();
    for (const flag of ["--version", "-V"]) {
      const result = await runCli([flag], { RUNNER_HOME: home.path });
      expect(result, flag).toMatchObject({ code: 0, stdout: `${VERSION}\n`, stderr: "" });
    }
  });

  it("--help lists the commands and shows examples; each command's --help has its own", async () => {
    await using home = temporaryDirectory();
    const top = await runCli(["--help"], { RUNNER_HOME: home.path });
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/-V, --version +output the version number/);
    for (const command of ["exec", "resume", "runs", "show", "policy", "image"]) expect(top.stdout).toMatch(new RegExp(`\\n  ${command}\\b`));
    expect(top.stdout).toContain("Examples:\n  runner exec task.yaml");
    expect(top.stdout).toContain('runner exec --instruction "Make the tests pass" --workspace ~/src/project --verify "npm test"');
    expect(top.stdout).toContain("Exit codes: 0 success, 1 verification failed or max_steps, 2 bad task or arguments, 3 infrastructure or model error, 130 interrupted.");
    const exec = await runCli(["exec", "--help"], { RUNNER_HOME: home.path });
    expect(exec.code).toBe(0);
    expect(exec.stdout).toContain("Examples:\n  runner exec task.yaml --json > events.jsonl");
    const resume = await runCli(["help", "resume"], { RUNNER_HOME: home.path });
    expect(resume.stdout).toContain("Examples:\n  runner resume 20");
  });
});
