/**
 * Allow-listed network benchmarks (issue 3): `npx tsx bench/network.bench.ts`
 *
 * 1. Bring-up: DockerSandboxProvider.create + first exec('true') with an
 *    allow-list (task network + egress proxy) vs with network none, and
 *    close() of each; interleaved round-robin (rotating which goes first).
 *    (The provider starts the sandbox while the proxy starts and awaits the
 *    proxy's readiness last.) Every round is split into phases by wrapping dockerode calls (offsets from the start
 *    of create(), medians).
 * 2. Request latency to a local test server (python http.server on a fake
 *    internet network this script creates): new connection per request,
 *    timed inside the container by python's perf_counter, so neither docker
 *    exec nor the sandbox channel is counted. "direct" runs in a client
 *    container on the fake internet itself (the proxy's egress side);
 *    "proxied" runs in the sandbox, through its proxy (absolute-form GET, and
 *    CONNECT + GET through the tunnel).
 *
 * Network: only the Docker socket, and containers on networks this script
 * creates (the fake internet is an internal network: nothing on it reaches
 * anything else). Cleanup: containers and networks carrying this process's
 * bench prefix, and the fake internet, are removed in `finally`, on
 * SIGINT/SIGTERM and from a watchdog.
 *
 * Options: --rounds=N     bring-up rounds per variant (default 20; use >= 20 for numbers)
 *          --batches=N    latency batches per variant (default 10, 10 requests each)
 */
import { execFile } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { promisify } from "node:util";
import type Docker from "dockerode";
import { DockerSandboxProvider } from "../src/sandbox/docker/docker-sandbox-provider.js";
import type { Sandbox, SandboxSpec } from "../src/sandbox/sandbox.js";
import { allowRules } from "../tests/helpers/docker.js";
import { createFakeInternet, type FakeInternet } from "../tests/helpers/fake-internet.js";
import { BENCH_IMAGE, BENCH_PREFIX, benchSpec, createWorkspace, nextRunId, requireDocker } from "./lib/docker-env.js";
import { fmt, goal, median, p90, printTable } from "./lib/stats.js";

const execFileAsync = promisify(execFile);
const WATCHDOG_MS = 300_000;
const EXTRA_BRING_UP_GOAL_MS = 300;
const REQUESTS_PER_BATCH = 10;

function option(name: string, fallback: number): number {
  const prefix = `--${name}=`;
  const raw = process.argv
    .slice(2)
    .find((argument) => argument.startsWith(prefix))
    ?.slice(prefix.length);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
  return value;
}
const ROUNDS = option("rounds", 20);
const BATCHES = option("batches", 10);

// ------------------------------------------------------------------ cleanup

/** Removes every container and network carrying this process's bench prefix, and the fake internet. Never throws. */
async function sweep(docker: Docker, internet: FakeInternet | null): Promise<string[]> {
  const removed: string[] = [];
  try {
    const containers = await docker.listContainers({ all: true, filters: { name: [BENCH_PREFIX] } });
    await Promise.all(
      containers.map((info) =>
        docker
          .getContainer(info.Id)
          .remove({ force: true })
          .then(
            () => removed.push(info.Names[0]!),
            () => undefined,
          ),
      ),
    );
    for (const info of await docker.listNetworks({ filters: { name: [BENCH_PREFIX] } })) {
      if (info.Name.startsWith("fake-internet-")) continue;
      await docker
        .getNetwork(info.Id)
        .remove()
        .then(
          () => removed.push(`network ${info.Name}`),
          () => undefined,
        );
    }
    await internet?.remove();
  } catch {
    // best effort
  }
  return removed;
}

// ------------------------------------------------------------------ phases of create()

let marks: { name: string; at: number }[] | null = null;
let traceStart = 0;
const kinds = new Map<string, "proxy" | "sandbox">();

function mark(name: string): void {
  marks?.push({ name, at: performance.now() - traceStart });
}

/** Wraps the dockerode calls create() makes, so each round records when they ended. */
function instrument(docker: Docker): void {
  const createNetwork = docker.createNetwork.bind(docker);
  docker.createNetwork = (async (options: Docker.NetworkCreateOptions) => {
    const network = await createNetwork(options);
    mark("task network created");
    return network;
  }) as Docker["createNetwork"];
  const createContainer = docker.createContainer.bind(docker);
  docker.createContainer = (async (options: Docker.ContainerCreateOptions) => {
    const kind = options.name?.endsWith("-proxy") ? "proxy" : "sandbox";
    const container = await createContainer(options);
    kinds.set(container.id, kind);
    mark(`${kind} created`);
    return container;
  }) as Docker["createContainer"];
  const networkPrototype = Object.getPrototypeOf(docker.getNetwork("x")) as { connect: (...args: unknown[]) => Promise<unknown> };
  const connect = networkPrototype.connect;
  networkPrototype.connect = async function (this: unknown, ...args: unknown[]) {
    const result = await connect.apply(this, args);
    mark("proxy connected to task network");
    return result;
  };
  const containerPrototype = Object.getPrototypeOf(docker.getContainer("x")) as { start: (...args: unknown[]) => Promise<unknown> };
  const start = containerPrototype.start;
  containerPrototype.start = async function (this: { id: string }, ...args: unknown[]) {
    const kind = kinds.get(this.id) ?? "other";
    mark(`${kind} start called`);
    const result = await start.apply(this, args);
    mark(`${kind} start returned`);
    return result;
  };
}

// ------------------------------------------------------------------ section 1: bring-up

const rules = allowRules;

const NONE = "network none";
const ALLOW = "allow-list";

async function benchBringUp(provider: DockerSandboxProvider, workspace: string, subnet: string) {
  const allowListSpec = (): SandboxSpec => ({ ...benchSpec(workspace, nextRunId()), network: { rules: rules(["allowed.test"]), allowCidrs: [subnet] } });
  const variants: Record<string, () => Promise<Sandbox>> = {
    [NONE]: () => provider.create({ ...benchSpec(workspace, nextRunId()), network: null }),
    [ALLOW]: () => provider.create(allowListSpec()),
  };
  const names = Object.keys(variants);
  const ready: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
  const close: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
  const phaseSamples: Record<string, Record<string, number[]>> = Object.fromEntries(names.map((name) => [name, {}]));
  const warmup = 2;
  for (let round = -warmup; round < ROUNDS; round += 1) {
    for (let k = 0; k < names.length; k += 1) {
      const variant = names[(k + Math.max(round, 0)) % names.length]!;
      marks = [];
      traceStart = performance.now();
      const started = performance.now();
      const sandbox = await variants[variant]!();
      mark("create() returned");
      const result = await sandbox.exec({ command: "true" });
      if (result.exitCode !== 0) throw new Error(`first exec exited ${result.exitCode}`);
      const readyMs = performance.now() - started;
      mark("first exec answered");
      const collected = marks;
      marks = null;
      const closeStarted = performance.now();
      await sandbox.close();
      const closeMs = performance.now() - closeStarted;
      if (round >= 0) {
        ready[variant]!.push(readyMs);
        close[variant]!.push(closeMs);
        for (const { name, at } of collected) (phaseSamples[variant]![name] ??= []).push(at);
      }
    }
  }
  return { ready, close, phaseSamples };
}

function printSteps(phaseSamples: Record<string, Record<string, number[]>>): void {
  const columns = [NONE, ALLOW];
  const order = (step: string) => median(phaseSamples[ALLOW]![step] ?? phaseSamples[NONE]![step] ?? []);
  const steps = [...new Set(columns.flatMap((variant) => Object.keys(phaseSamples[variant]!)))].sort((a, b) => order(a) - order(b));
  console.log("\n   when each step ended, ms after create() was called (median / p90)");
  console.log(`   ${"step".padEnd(32)} ${columns.map((variant) => variant.slice(0, 22).padStart(22)).join(" ")}`);
  for (const step of steps) {
    const cells = columns.map((variant) => {
      const samples = phaseSamples[variant]![step];
      return (samples ? `${fmt(median(samples))} / ${fmt(p90(samples))}` : "-").padStart(22);
    });
    console.log(`   ${step.padEnd(32)} ${cells.join(" ")}`);
  }
}

// ------------------------------------------------------------------ section 2: request latency

const CLIENT_SCRIPT = String.raw`
import http.client, json, os, sys, time
mode, target, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
proxy = os.environ.get("HTTP_PROXY", "").replace("http://", "")
proxy_host, _, proxy_port = proxy.partition(":")
samples = []
for _ in range(count):
    started = time.perf_counter()
    if mode == "direct":
        connection = http.client.HTTPConnection(target, 80, timeout=10)
        connection.request("GET", "/")
    elif mode == "proxy-get":
        connection = http.client.HTTPConnection(proxy_host, int(proxy_port), timeout=10)
        connection.request("GET", "http://%s/" % target)
    else:
        connection = http.client.HTTPConnection(proxy_host, int(proxy_port), timeout=10)
        connection.set_tunnel(target, 443)
        connection.request("GET", "/")
    response = connection.getresponse()
    body = response.read()
    connection.close()
    if response.status != 200 or not body.startswith(b"hello-from-"):
        sys.exit("unexpected answer %d %r" % (response.status, body[:200]))
    samples.append((time.perf_counter() - started) * 1000)
print(json.dumps(samples))
`;

async function benchLatency(docker: Docker, internet: FakeInternet, sandbox: Sandbox): Promise<Record<string, number[]>> {
  const client = await docker.createContainer({
    name: `agent-runner-${BENCH_PREFIX}-latency-client`,
    Image: BENCH_IMAGE,
    Entrypoint: [],
    Cmd: ["sleep", "600"],
    HostConfig: { NetworkMode: internet.network, CapDrop: ["ALL"], SecurityOpt: ["no-new-privileges"], AutoRemove: true },
  });
  await client.start();
  try {
    const ip = internet.server("allowed.test").ip;
    const inClient = async (mode: string, target: string) => {
      const { stdout } = await execFileAsync("docker", ["exec", client.id, "python3", "-c", CLIENT_SCRIPT, mode, target, String(REQUESTS_PER_BATCH)]);
      return JSON.parse(stdout) as number[];
    };
    const inSandbox = async (mode: string, target: string) => {
      const result = await sandbox.exec({
        command: `python3 -c "$SCRIPT" ${mode} ${target} ${REQUESTS_PER_BATCH}`,
        env: { SCRIPT: CLIENT_SCRIPT },
        timeoutMs: 60_000,
      });
      if (result.exitCode !== 0) throw new Error(`latency batch ${mode} failed: ${result.stderr}`);
      return JSON.parse(result.stdout) as number[];
    };
    const variants: Record<string, () => Promise<number[]>> = {
      "direct by IP (client on the fake internet)": () => inClient("direct", ip),
      "direct by name (+ Docker DNS lookup)": () => inClient("direct", "allowed.test"),
      "proxied GET http://allowed.test/ (sandbox)": () => inSandbox("proxy-get", "allowed.test"),
      "proxied CONNECT allowed.test:443 + GET (sandbox)": () => inSandbox("proxy-connect", "allowed.test"),
    };
    const names = Object.keys(variants);
    const samples: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
    for (let batch = -1; batch < BATCHES; batch += 1) {
      for (let k = 0; k < names.length; k += 1) {
        const name = names[(k + Math.max(batch, 0)) % names.length]!;
        const batchSamples = await variants[name]!();
        if (batch >= 0) samples[name]!.push(...batchSamples);
      }
    }
    return samples;
  } finally {
    await client.remove({ force: true }).catch(() => undefined);
  }
}

// ------------------------------------------------------------------ main

const docker = await requireDocker();
let internet: FakeInternet | null = null;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: removing bench containers and networks...`);
    void sweep(docker, internet).finally(() => process.exit(130));
  });
}
const watchdog = setTimeout(() => {
  console.error(`\nbench: still running after ${WATCHDOG_MS / 1000} s; cleaning up and giving up`);
  void sweep(docker, internet).finally(() => process.exit(1));
}, WATCHDOG_MS);

const workspace = createWorkspace({ "README.md": "# network bench\n" });
const version = (await docker.version()) as { Version?: string };
console.log(
  `agent-runner network bench: node ${process.version}, Docker ${version.Version ?? "?"}, ${cpus().length} CPUs, image ${BENCH_IMAGE}, ` +
    `load ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}, ${(await docker.listContainers()).length} other container(s) running`,
);
const benchStarted = performance.now();
let failed = false;
try {
  internet = await createFakeInternet(docker, { id: BENCH_PREFIX, image: BENCH_IMAGE, servers: [{ aliases: ["allowed.test"] }] });
  instrument(docker);
  const provider = new DockerSandboxProvider({ docker, egressNetwork: internet.network });

  const bringUpStarted = performance.now();
  const { ready, close, phaseSamples } = await benchBringUp(provider, workspace.path, internet.subnet);
  printTable(`1. bring-up: create + first exec('true'), interleaved, ${ROUNDS} rounds`, [
    { name: `ready: ${NONE}`, samples: ready[NONE]! },
    { name: `ready: ${ALLOW} (provider)`, samples: ready[ALLOW]!, baseline: `ready: ${NONE}` },
    { name: `close(): ${NONE}`, samples: close[NONE]! },
    { name: `close(): ${ALLOW}`, samples: close[ALLOW]!, baseline: `close(): ${NONE}` },
  ]);
  const extra = (variant: string) => median(ready[variant]!) - median(ready[NONE]!);
  console.log(`   extra bring-up (difference of medians): ${fmt(extra(ALLOW))} ms; ` + `extra close: ${fmt(median(close[ALLOW]!) - median(close[NONE]!))} ms`);
  printSteps(phaseSamples);
  console.log(`   (section 1: ${((performance.now() - bringUpStarted) / 1000).toFixed(1)} s)`);

  const latencyStarted = performance.now();
  const sandbox = await provider.create({
    ...benchSpec(workspace.path, nextRunId()),
    network: { rules: rules(["allowed.test"]), allowCidrs: [internet.subnet] },
  });
  let latency: Record<string, number[]>;
  try {
    latency = await benchLatency(docker, internet, sandbox);
  } finally {
    await sandbox.close();
  }
  const [directIp, directName, proxiedGet, proxiedConnect] = Object.keys(latency);
  printTable(`2. request latency, new connection per request (${BATCHES} batches x ${REQUESTS_PER_BATCH}, interleaved)`, [
    { name: directIp!, samples: latency[directIp!]! },
    { name: directName!, samples: latency[directName!]!, baseline: directIp },
    { name: proxiedGet!, samples: latency[proxiedGet!]!, baseline: directName },
    { name: proxiedConnect!, samples: latency[proxiedConnect!]!, baseline: directName },
  ]);
  console.log(
    `   proxy overhead (difference of medians vs direct by name): GET ${fmt(median(latency[proxiedGet!]!) - median(latency[directName!]!))} ms, ` +
      `CONNECT ${fmt(median(latency[proxiedConnect!]!) - median(latency[directName!]!))} ms`,
  );
  console.log(`   (section 2: ${((performance.now() - latencyStarted) / 1000).toFixed(1)} s)`);

  console.log("\n== goals");
  const extraSamples = ready[ALLOW]!.map((value) => value - median(ready[NONE]!));
  console.log(goal("extra bring-up with an allow-list (samples minus the none median)", extraSamples, EXTRA_BRING_UP_GOAL_MS));
} catch (error) {
  failed = true;
  console.error(`\nbench failed: ${(error as Error).stack ?? error}`);
} finally {
  clearTimeout(watchdog);
  workspace.dispose();
  const leftovers = await sweep(docker, internet);
  const unexpected = leftovers.filter((name) => !name.startsWith("/fake-internet-"));
  if (unexpected.length) console.log(`swept ${unexpected.length} leftover(s): ${unexpected.join(", ")}`);
  console.log(
    `\ntotal ${((performance.now() - benchStarted) / 1000).toFixed(1)} s; load now ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
}
process.exit(failed ? 1 : 0);
