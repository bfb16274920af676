/**
 * The guards that cannot follow an invocation to a `runner worker` (issue 25;
 * docs/scale-out.md "Agencies on workers"): `confirm`, `policies.rate_limit`
 * and `budget` act from the orchestrator's process inside a running
 * invocation, so an agency whose invocations run on workers refuses them at
 * load (exit 2, naming each field and why) rather than dropping them.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { InvocationExecutor } from "../../../src/agency/invocation-executor.js";
import { AgencyFileError, loadAgency } from "../../../src/agency/load-agency.js";
import { ConfigError } from "../../../src/errors.js";
import { fakeAgencyRunner, writeAgency } from "../../helpers/agency-fixture.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";

const CLI = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));

/** An executor on workers that must never be asked to run anything (the refusal comes first). */
const unreachableWorkers: InvocationExecutor = {
  where: "workers",
  start: () => Promise.reject(new Error("an invocation started although the agency should have been refused")),
  resume: () => Promise.reject(new Error("an invocation resumed although the agency should have been refused")),
};

describe("an agency with its invocations on workers", () => {
  it("bus: nats://… with confirm and rate_limit: refused at load, each field named with why", async () => {
    await using directory = temporaryDirectory();
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        coder: {
          triggers: ["task.ready"],
          turns: [],
          policies: { rate_limit: { tool_calls_per_minute: 10 } },
          extra: { confirm: ["write_file"] },
        },
      },
      agency: { bus: "nats://127.0.0.1:4222", confirm: ["run_shell"] },
    });
    const error = await loadAgency(agencyFile).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AgencyFileError);
    const coder = join(directory.path, "agents", "coder.yaml");
    expect((error as AgencyFileError).problems).toEqual([
      { file: agencyFile, field: "confirm", message: expect.stringMatching(/^confirm with invocations on runner workers \(bus: nats:\/\/…\) is not built: /) },
      { file: coder, field: "agent.confirm", message: expect.stringContaining("is not built") },
      { file: coder, field: "agent.policies.rate_limit", message: expect.stringContaining("token buckets") },
    ]);
  });

  it("runner agency run exits 2 naming the field, and creates nothing", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { agencyFile } = writeAgency(directory.path, {
      agents: { coder: { triggers: ["task.ready"], turns: [] } },
      agency: { bus: "nats://127.0.0.1:4222", confirm: ["run_shell"] },
    });
    const result = spawnSync(process.execPath, ["--import", "tsx", CLI, "agency", "run", agencyFile], {
      encoding: "utf8",
      env: { ...process.env, RUNNER_HOME: home.path },
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("confirm: confirm with invocations on runner workers (bus: nats://…) is not built");
    expect(existsSync(join(home.path, "agencies"))).toBe(false);
  });

  it("an executor on workers given to a file-bus agency refuses the same guards, before anything is created", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner();
    const { agencyFile, git } = writeAgency(directory.path, {
      agents: { coder: { triggers: ["task.ready"], turns: [], policies: { rate_limit: { events_per_minute: 5 } } } },
    });
    const error = await fake.runner.agency(agencyFile, { executor: unreachableWorkers }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).exitCode).toBe(2);
    expect((error as Error).message).toContain("agent.policies.rate_limit: rate_limit with invocations on runner workers");
    expect(git("branch", "--list", "agency/*")).toBe("");
    expect(existsSync(join(fake.home, "agencies"))).toBe(false);
  });
});
