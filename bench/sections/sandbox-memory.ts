/**
 * Subagent bench, part 3: memory of idle sandboxes. Each round starts N
 * sandboxes with `DockerSandboxProvider.create` (the runner's own container
 * options, the in-container daemon started by `node -e`) and one `exec
 * true` each, leaves them idle, then reads each container's memory cgroup
 * (cgroup v1 `memory.usage_in_bytes` and `memory.stat`; v2 `memory.current`
 * and `memory.stat`) and `docker stats --no-stream`, and the bench process's
 * RSS before and after (after a forced GC both times). Baseline in the same
 * round: N `docker run -d --init --network none <image> sleep` containers
 * (the engine's floor: docker-init + sleep).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type Docker from "dockerode";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { BENCH_IMAGE, benchSpec, createWorkspace, execFileAsync, nextContainerName, sweepBenchContainers } from "../lib/docker-env.js";
import { fmt, median, p90, type Row } from "../lib/stats.js";

setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

const MB = 1024 * 1024;

/** lib/stats.ts's printTable with the unit in the header (MB here, not ms). */
function printMbTable(title: string, rows: Row[]): void {
  const ratio = (row: Row) => {
    const base = rows.find((candidate) => candidate.name === row.baseline);
    return base ? `${(median(row.samples) / median(base.samples)).toFixed(median(row.samples) / median(base.samples) >= 10 ? 0 : 2)}x ${row.baseline}` : "";
  };
  const header = ["name", "n", "median MB", "p90 MB", "ratio (median) vs baseline"];
  const body = rows.map((row) => [row.name, String(row.samples.length), fmt(median(row.samples)), fmt(p90(row.samples)), ratio(row)]);
  const widths = header.map((cell, column) => Math.max(cell.length, ...body.map((line) => line[column]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === 0 || column === 4 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
      .join("  ")
      .trimEnd();
  console.log(`\n== ${title}`);
  console.log(line(header));
  console.log(widths.map((width) => "-".repeat(width)).join("  "));
  for (const cells of body) console.log(line(cells));
  for (const row of rows) if (row.note) console.log(`   ${row.name}: ${row.note}`);
}

function rssAfterGc(): { rss: number; heap: number } {
  collectGarbage();
  collectGarbage();
  const usage = process.memoryUsage();
  return { rss: usage.rss, heap: usage.heapUsed + usage.external };
}

interface CgroupMemory {
  /** memory.usage_in_bytes (v1) / memory.current (v2). */
  usage: number;
  /** Anonymous memory: v1 total_rss, v2 anon. */
  anon: number;
  /** Page cache: v1 total_cache, v2 file. */
  cache: number;
}

/** The container's memory cgroup directory (cgroupfs driver, v1 or v2), or null. */
function cgroupDirectory(fullId: string): string | null {
  for (const candidate of [
    `/sys/fs/cgroup/memory/docker/${fullId}`,
    `/sys/fs/cgroup/memory/system.slice/docker-${fullId}.scope`,
    `/sys/fs/cgroup/docker/${fullId}`,
    `/sys/fs/cgroup/system.slice/docker-${fullId}.scope`,
  ]) {
    if (existsSync(candidate)) return candidate;
  }
  return null;
}

function readCgroup(fullId: string): CgroupMemory | null {
  const directory = cgroupDirectory(fullId);
  if (!directory) return null;
  const stat = Object.fromEntries(
    readFileSync(join(directory, "memory.stat"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => line.split(" ") as [string, string]),
  );
  const v1 = existsSync(join(directory, "memory.usage_in_bytes"));
  const usage = Number(readFileSync(join(directory, v1 ? "memory.usage_in_bytes" : "memory.current"), "utf8"));
  return v1 ? { usage, anon: Number(stat.total_rss), cache: Number(stat.total_cache) } : { usage, anon: Number(stat.anon), cache: Number(stat.file) };
}

/** `12.3MiB` / `1.2GiB` / `900kB` → bytes. */
function parseSize(text: string): number {
  const match = /^([\d.]+)\s*([KMGT]?i?B)$/i.exec(text.trim());
  if (!match) return Number.NaN;
  const units: Record<string, number> = { B: 1, KB: 1e3, KIB: 1024, MB: 1e6, MIB: MB, GB: 1e9, GIB: 1024 * MB, TB: 1e12, TIB: MB * MB };
  return Number(match[1]) * (units[match[2]!.toUpperCase()] ?? Number.NaN);
}

/** `docker stats --no-stream` memory usage (what the CLI shows) by full container id. */
async function dockerStats(ids: string[]): Promise<Map<string, number>> {
  const { stdout } = await execFileAsync("docker", ["stats", "--no-stream", "--no-trunc", "--format", "{{.ID}} {{.MemUsage}}", ...ids]);
  const result = new Map<string, number>();
  for (const line of stdout.split("\n").filter(Boolean)) {
    const [id, ...rest] = line.split(" ");
    result.set(id!, parseSize(rest.join(" ").split("/")[0]!));
  }
  return result;
}

async function fullIdOf(docker: Docker, idOrName: string): Promise<string> {
  return (await docker.getContainer(idOrName).inspect()).Id;
}

interface Measured {
  cgroup: CgroupMemory[];
  stats: number[];
}

async function measure(docker: Docker, ids: string[]): Promise<Measured> {
  const full = await Promise.all(ids.map((id) => fullIdOf(docker, id)));
  const cgroup = full.map((id) => readCgroup(id)).filter((value): value is CgroupMemory => value !== null);
  const stats = await dockerStats(full);
  return { cgroup, stats: full.map((id) => stats.get(id) ?? Number.NaN) };
}

export async function benchSandboxMemory(docker: Docker, options: { rounds: number; sandboxes: number; idleMs: number }): Promise<void> {
  const provider = new DockerSandboxProvider({ docker });
  const workspace = createWorkspace({ "hello.py": "print('hello')\n" });
  const sandboxRows: Measured[] = [];
  const floorRows: Measured[] = [];
  const rssGrowth: number[] = [];
  const heapGrowth: number[] = [];
  const rssLeft: number[] = [];
  try {
    // Warm-up: one sandbox, so the first round does not pay for cold caches.
    const warm = await provider.create(benchSpec(workspace.path));
    await warm.exec({ command: "true" });
    await warm.close();
    rssAfterGc();
    for (let round = 0; round < options.rounds; round += 1) {
      // The engine's floor: docker-init + sleep.
      const floorNames = Array.from({ length: options.sandboxes }, () => nextContainerName("sleep"));
      for (const name of floorNames) {
        await execFileAsync("docker", ["run", "-d", "--rm", "--init", "--network", "none", "--name", name, BENCH_IMAGE, "sleep", "120"]);
      }
      await new Promise((resolve) => setTimeout(resolve, options.idleMs));
      floorRows.push(await measure(docker, floorNames));
      await execFileAsync("docker", ["rm", "-f", ...floorNames]);

      const before = rssAfterGc();
      const sandboxes: Sandbox[] = [];
      try {
        for (let index = 0; index < options.sandboxes; index += 1) {
          const sandbox = await provider.create(benchSpec(workspace.path));
          sandboxes.push(sandbox);
          await sandbox.exec({ command: "true" });
        }
        await new Promise((resolve) => setTimeout(resolve, options.idleMs));
        const after = rssAfterGc();
        rssGrowth.push((after.rss - before.rss) / options.sandboxes);
        heapGrowth.push((after.heap - before.heap) / options.sandboxes);
        const measured = await measure(
          docker,
          sandboxes.map((sandbox) => sandbox.id),
        );
        sandboxRows.push(measured);
        console.log(
          `   round ${round + 1}: ${options.sandboxes} idle sandboxes, cgroup usage ${measured.cgroup.map((entry) => (entry.usage / MB).toFixed(1)).join(" / ")} MB ` +
            `(floor ${floorRows
              .at(-1)!
              .cgroup.map((entry) => (entry.usage / MB).toFixed(1))
              .join(" / ")}), runner RSS +${((after.rss - before.rss) / MB).toFixed(1)} MB`,
        );
      } finally {
        await Promise.all(sandboxes.map((sandbox) => sandbox.close().catch(() => undefined)));
      }
      rssLeft.push(rssAfterGc().rss - before.rss);
    }
  } finally {
    await sweepBenchContainers(docker);
    workspace.dispose();
  }
  const mb = (values: number[]) => values.map((value) => value / MB);
  const pool = (rows: Measured[], pick: (entry: CgroupMemory) => number) => mb(rows.flatMap((row) => row.cgroup.map(pick)));
  const rows: Row[] = [
    {
      name: "floor: sleep container, cgroup usage",
      samples: pool(floorRows, (entry) => entry.usage),
      note: "docker run -d --init --network none <image> sleep (docker-init + sleep)",
    },
    { name: "floor: sleep container, docker stats", samples: mb(floorRows.flatMap((row) => row.stats)) },
    {
      name: "idle sandbox, cgroup usage",
      samples: pool(sandboxRows, (entry) => entry.usage),
      baseline: "floor: sleep container, cgroup usage",
      note: "memory.usage_in_bytes: anonymous memory + page cache charged to the container",
    },
    { name: "  anonymous (rss)", samples: pool(sandboxRows, (entry) => entry.anon), note: "the in-container node daemon's heap and stacks (+ docker-init)" },
    {
      name: "  page cache",
      samples: pool(sandboxRows, (entry) => entry.cache),
      note: "file pages first read by this container (image files, node's binary pages not already cached by another cgroup)",
    },
    {
      name: "idle sandbox, docker stats",
      samples: mb(sandboxRows.flatMap((row) => row.stats)),
      baseline: "floor: sleep container, docker stats",
      note: "docker stats --no-stream MEM USAGE (usage minus cache on cgroup v1)",
    },
    { name: "runner RSS growth per sandbox", samples: mb(rssGrowth), note: "bench process RSS after GC, with the sandboxes open minus before, / N" },
    { name: "runner heapUsed + external growth per sandbox", samples: mb(heapGrowth) },
    { name: "runner RSS after closing them all", samples: mb(rssLeft), note: "minus before (not per sandbox): what is not given back" },
  ];
  printMbTable(`3. memory per idle sandbox (MB; ${options.sandboxes} sandboxes x ${options.rounds} rounds, idle ${options.idleMs} ms)`, rows);
  const usage = median(pool(sandboxRows, (entry) => entry.usage));
  const heapKb = median(mb(heapGrowth)) * 1024;
  const rssMb = median(mb(rssGrowth));
  const measurable = Math.abs(heapKb) >= 64 || Math.abs(rssMb) >= 1;
  console.log(
    `   ${options.sandboxes} idle sandboxes: ~${fmt(usage * options.sandboxes)} MB of cgroup memory on the host (${fmt(usage)} MB each); ` +
      `in the runner, per sandbox: heap + buffers ${heapKb.toFixed(1)} KB, RSS ${rssMb.toFixed(2)} MB (medians)${measurable ? "" : ": no growth measurable above a GC's noise"}`,
  );
}
