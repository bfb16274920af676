/**
 * An agency's invocations on `runner worker`s (issue 25, docs/scale-out.md
 * "Agencies on workers"): examples/agency/fix-pipeline (7 invocations, one at a
 * time) run by an orchestrator whose invocations run in its own Runner
 * (`local`, the baseline) against the same agency with its invocations on 2
 * in-process workers of a one-node JetStream on loopback (Debian's
 * nats-server). Every variant is the Docker-free tier (HostDirectorySandboxProvider,
 * the scripted model over HTTP, real git): what is measured is what an
 * invocation on a worker adds — the job, the base bundle, the records and the
 * branch bundle back, the merge in the orchestrator — not Docker.
 *
 *   npx tsx bench/agency-workers.bench.ts [--rounds=3]
 *
 * Prints the agency's wall time per variant (median, p90) and the ratio to
 * local; per invocation overhead = (workers - local) / 7.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createRunner } from "../src/agency/agency.js";
import { HostDirectorySandboxProvider } from "../src/sandbox/fake/host-directory-sandbox.js";
import { copyFixPipeline, openPool, pytestShell, startWorker } from "../tests/helpers/agency-workers.js";
import { fakeTierEnvironment } from "../tests/helpers/fake-runner.js";
import { startNatsCluster } from "../tests/helpers/nats-cluster.js";
import { option, positiveOption } from "./lib/options.js";
import { interleave, median, printTable } from "./lib/stats.js";

const rounds = positiveOption("rounds", 3);
const scratch = mkdtempSync(join(tmpdir(), "agent-runner-bench-agency-workers-"));
const cluster = await startNatsCluster(1);
const home = mkdtempSync(join(scratch, "orchestrator-"));
const orchestrator = await createRunner({
  home,
  sandboxProvider: new HostDirectorySandboxProvider({ exec: pytestShell }),
  environment: fakeTierEnvironment(home),
});
const pool = await openPool(cluster.urls, home, { ackWaitMs: 60_000 });
const workers = [await startWorker(cluster.urls, pool.pool, "worker-one"), await startWorker(cluster.urls, pool.pool, "worker-two")];
const executor = await pool.executor();

/** One fix-pipeline agency from a fresh copy; throws unless it reached its goal. */
async function runAgency(onWorkers: boolean): Promise<void> {
  const { agencyFile } = copyFixPipeline(mkdtempSync(join(scratch, "agency-")));
  const agency = await orchestrator.agency(agencyFile, onWorkers ? { executor } : {});
  const report = await agency.result;
  if (report.status !== "succeeded") throw new Error(`the agency ended ${report.status} (${report.reason})`);
}

try {
  const samples = await interleave({ local: () => runAgency(false), "2 workers": () => runAgency(true) }, rounds, Number(option("warmup") ?? 1));
  printTable(`fix-pipeline agency (7 invocations), ${rounds} rounds, load ${loadavg()[0]!.toFixed(1)}`, [
    { name: "local", samples: samples.local! },
    {
      name: "2 workers",
      samples: samples["2 workers"]!,
      baseline: "local",
      note: `per invocation overhead ${((median(samples["2 workers"]!) - median(samples.local!)) / 7).toFixed(0)} ms`,
    },
  ]);
} finally {
  for (const worker of workers) await worker[Symbol.asyncDispose]();
  await pool[Symbol.asyncDispose]();
  await orchestrator.close();
  await cluster.close();
  rmSync(scratch, { recursive: true, force: true });
}
