// Two tasks at once in one process through the library (docs/library.md "Library"):
// each has its own secret (sandbox.secret_env), prints it from inside its
// sandbox, and neither secret may appear in clear in any record of either run.
// Run it after `make setup`:  node examples/library/two-runs.mjs
// It makes its own repositories and scripts in a temporary directory; runs go
// to $RUNNER_HOME (default ~/.runner). Prints one JSON line per run.
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRunner } from "agent-runner";

const here = dirname(fileURLToPath(import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "agent-runner-library-"));

function task(name, secretVariable) {
  const directory = join(scratch, name);
  cpSync(join(here, "..", "fix-median", "repo"), join(directory, "repo"), { recursive: true });
  const git = (...args) => execFileSync("git", ["-c", "user.name=example", "-c", "user.email=example@localhost", ...args], { cwd: join(directory, "repo") });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-qm", "initial");
  // JSON is YAML: the agent prints its secret, then answers.
  const turns = [
    { tool_calls: [{ name: "run_shell", arguments: { command: `echo "my secret is $${secretVariable}"` } }] },
    { content: `Printed ${secretVariable}.` },
  ];
  writeFileSync(join(directory, "script.yaml"), JSON.stringify({ turns }));
  return {
    name,
    instruction: `Print ${secretVariable}.`,
    workspace: join(directory, "repo"),
    model: { provider: "scripted", script: join(directory, "script.yaml") },
    sandbox: { secret_env: [secretVariable] },
    max_steps: 5,
  };
}

const runner = await createRunner({
  environment: {
    ...process.env,
    FIRST_SECRET: process.env.FIRST_SECRET ?? "first-secret-value-1234",
    SECOND_SECRET: process.env.SECOND_SECRET ?? "second-secret-value-5678",
  },
});
try {
  const runs = await Promise.all([runner.start(task("first-run", "FIRST_SECRET")), runner.start(task("second-run", "SECOND_SECRET"))]);
  for (const run of runs) {
    const report = await run.result;
    console.log(JSON.stringify({ run_id: run.id, directory: run.directory, status: report.status, reason: report.reason, steps: report.steps }));
  }
} finally {
  await runner.close();
  rmSync(scratch, { recursive: true, force: true });
}
