import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { ConfigError } from "../errors.js";
import { detectTestCommand, type DetectedTestCommand } from "./init-command.js";

const MODEL = [
  "  model:",
  "    provider: openai            # OPENAI_API_KEY; OPENAI_BASE_URL for another OpenAI-compatible endpoint",
  "    # name: gpt-4.1             # or set OPENAI_MODEL",
];

/** The four agents `runner agency init` writes: least privilege each (only the coder writes). */
function agentFiles(test: DetectedTestCommand | null): Record<string, string> {
  const testCommand = test?.command ?? "make test";
  const verify = test
    ? [
        "  verify:                       # its change merges into agency/<id> only if this passes (a fresh sandbox, the committed work)",
        `    command: ${test.command}${" ".repeat(Math.max(1, 21 - test.command.length))}# found: ${test.source}`,
        '    protect: ["tests/**"]       # restored from the base commit before verifying: the coder cannot weaken the tests',
      ]
    : ["  # verify:                     # no test command found: say how to check the coder's change", "  #   command: make test"];
  return {
    "analyst.yaml": [
      "# The analyst reads the request and the code and writes the coder a plan. Read-only (docs/agency.md).",
      "agent:",
      "  name: analyst",
      "  description: reads the request and the code, and writes the coder a plan",
      ...MODEL,
      "  instructions: |",
      "    Read the request in the event and the agency's context (read_context). Find where the change",
      "    belongs; change nothing. Publish coding.task.ready with a short plan: files, functions, what to do.",
      "  triggers:",
      "    - event: coding.task.received",
      "  capabilities:                 # no write tool: it runs on a read-only mount",
      "    - tool: read_file",
      "    - tool: list_dir",
      "    - tool: glob",
      "    - tool: grep",
      "  emits: [coding.task.ready]",
      "  policies: { max_concurrency: 1, timeout_seconds: 600 }",
      "",
    ].join("\n"),
    "coder.yaml": [
      "# The coder makes the change the plan or the review asks for. The only agent that writes.",
      "agent:",
      "  name: coder",
      "  description: changes the code and runs the tests",
      ...MODEL,
      "  instructions: |",
      "    Make the change the plan or the review asks for, in the smallest edit that does it.",
      `    Run the tests (${testCommand}). Do not change the tests. Then publish coding.code.ready saying what changed.`,
      "  triggers:",
      "    - event: coding.task.ready",
      "    - event: coding.review.changes_requested",
      "  capabilities:",
      "    - tool: read_file",
      "    - tool: list_dir",
      "    - tool: grep",
      "    - tool: edit_file",
      "    - tool: write_file",
      "    - tool: run_shell",
      "  emits: [coding.code.ready]",
      ...verify,
      "  policies: { max_concurrency: 1, timeout_seconds: 1800 }",
      "  permissions:                  # deny wins; .git is never writable anyway",
      '    allowed_paths: ["**"]',
      '    denied_paths: [".github/**", "deploy/**"]',
      "",
    ].join("\n"),
    "tester.yaml": [
      "# The tester runs the tests on the merged work and reports. Read-only: run_shell on a read-only mount.",
      "agent:",
      "  name: tester",
      "  description: runs the tests on the merged change and reports pass or fail",
      ...MODEL,
      "  instructions: |",
      `    Run the test suite (${testCommand}) on the current work. Publish coding.tests.passed when it passes,`,
      "    coding.tests.failed with the failing tests and their output when it does not.",
      "  triggers:",
      "    - event: coding.code.ready",
      "  capabilities:",
      "    - tool: read_file",
      "    - tool: run_shell",
      "  emits: [coding.tests.passed, coding.tests.failed]",
      "  policies: { max_concurrency: 1, timeout_seconds: 1200 }",
      "",
    ].join("\n"),
    "reviewer.yaml": [
      "# The reviewer approves the change or sends it back to the coder. Read-only.",
      "agent:",
      "  name: reviewer",
      "  description: reviews the change and approves it or sends it back",
      ...MODEL,
      "  instructions: |",
      "    Review the change against the requirement and the constraints in the context. Publish",
      "    coding.review.approved when it is ready, or coding.review.changes_requested with exactly what to change.",
      "  triggers:",
      "    - event: coding.tests.passed",
      "  capabilities:",
      "    - tool: read_file",
      "    - tool: glob",
      "    - tool: grep",
      "  emits: [coding.review.approved, coding.review.changes_requested]",
      "  policies: { max_concurrency: 1, timeout_seconds: 900 }",
      "",
    ].join("\n"),
  };
}

function agencyYaml(name: string, workspace: string): string {
  return [
    "# An agency for runner (`runner agency run agency.yaml`); docs/agency.md lists every field.",
    "# Generated by `runner agency init`. analyst → coder → tester → reviewer, with review → fix rounds.",
    `name: ${name}`,
    `workspace: ${workspace}${" ".repeat(Math.max(1, 25 - workspace.length))}# the git repository; the work lands on branch agency/<agency-id>`,
    "agents: ./agents                 # every *.yaml in it is one agent",
    "bus: file                        # the embedded, durable event log",
    "context:                         # every agent reads it (tool read_context)",
    '  requirement: "describe the change you want"',
    "  files: []",
    '  constraints: ["do not change the tests"]',
    "start:                           # published when the agency starts (or give --event TYPE --data JSON)",
    '  - { type: coding.task.received, subject: task-1, data: { issue: "describe the change you want" } }',
    "goal: coding.review.approved     # the event that means done (exit 0)",
    "max_hops: 8                      # hand-offs in one chain; past it the chain stops (exit 1)",
    "mode: normal                     # conservative: every agent read-only",
    "confirm: []                      # e.g. [run_shell]: a person approves each such call",
    "# budget: { max_cost_usd: 5.00 } # the agency's total spend (needs priced models)",
    "",
  ].join("\n");
}

/**
 * `runner agency init [dir]`: agency.yaml and agents/{analyst,coder,tester,reviewer}.yaml in
 * `dir` for the git repository it is in, the coder's verify command detected as `runner init`
 * does. Refuses (ConfigError, exit 2) outside a repository or when any file exists; nothing is
 * half-written. Returns the exit code.
 */
export function agencyInit(dir: string, output: NodeJS.WritableStream = process.stdout): number {
  const directory = resolve(dir);
  if (!existsSync(directory) || !statSync(directory).isDirectory()) throw new ConfigError(`runner agency init: ${directory} is not a directory`);
  let topLevel: string;
  try {
    topLevel = execFileSync("git", ["-C", directory, "rev-parse", "--show-toplevel"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
  } catch {
    throw new ConfigError(`runner agency init: ${directory} is not in a git repository (git init && git add -A && git commit -m initial)`);
  }
  const test = detectTestCommand(topLevel);
  const agents = agentFiles(test);
  const files = [join(directory, "agency.yaml"), ...Object.keys(agents).map((name) => join(directory, "agents", name))];
  const existing = files.filter((file) => {
    try {
      lstatSync(file);
      return true;
    } catch {
      return false;
    }
  });
  if (existing.length) throw new ConfigError(`runner agency init: ${existing.join(", ")} already exist; nothing was written (run it in another directory)`);
  const name =
    basename(topLevel)
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "") || "agency";
  mkdirSync(join(directory, "agents"), { recursive: true });
  writeFileSync(files[0]!, agencyYaml(name, relative(directory, topLevel) || "."), { flag: "wx" });
  for (const [file, text] of Object.entries(agents)) writeFileSync(join(directory, "agents", file), text, { flag: "wx" });
  output.write(
    [
      `wrote ${files[0]} and ${join(directory, "agents")}/ (analyst, coder, tester, reviewer)${test ? ` (verify: ${test.command}, from ${test.source})` : " (no test command found: fill in the coder's verify)"}`,
      "next: describe the change in context and start, then  runner agency run agency.yaml",
      "",
    ].join("\n"),
  );
  return 0;
}
