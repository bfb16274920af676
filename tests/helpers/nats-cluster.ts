import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A JetStream cluster of real `nats-server` processes (Debian's nats-server
 * 2.9) on loopback, for tests: N nodes, each with its own store directory,
 * client port, cluster (route) port and monitoring port. `stop(i)` kills a
 * node (SIGKILL) and `start(i)` brings it back on the same ports and store, for
 * failover tests. Under CI=true a missing nats-server fails the test (see
 * {@link requireNatsServer}); it never skips.
 */
export interface NatsCluster {
  /** `nats://127.0.0.1:<port>` of every node, in node order. */
  readonly urls: string[];
  /** The comma-separated form `runner worker --nats` takes. */
  readonly url: string;
  /** Kills node `index` (SIGKILL); resolves once it has exited. */
  stop(index: number): Promise<void>;
  /** Starts node `index` again (same ports and store); resolves once it reports healthy. */
  start(index: number): Promise<void>;
  /** Kills every node and removes the store directories. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const NATS_SERVER = "/usr/sbin/nats-server";

/** Throws with the install command when Debian's nats-server is absent (`.ci/run` installs it). */
async function requireNatsServer(): Promise<void> {
  const { existsSync } = await import("node:fs");
  if (!existsSync(NATS_SERVER)) throw new Error("the NATS tests need Debian's nats-server: apt-get install nats-server (.ci/run installs it)");
}

/** Starts `nodes` JetStream servers clustered on loopback (1 = a single server, no cluster block). */
export async function startNatsCluster(nodes = 3): Promise<NatsCluster> {
  await requireNatsServer();
  const root = mkdtempSync(join(tmpdir(), "nats-cluster-"));
  const ports = await Promise.all(
    Array.from({ length: nodes }, async () => ({ client: await freePort(), route: await freePort(), monitor: await freePort() })),
  );
  const configs = ports.map((port, index) => {
    const routes = ports.filter((_, other) => other !== index).map((other) => `nats-route://127.0.0.1:${other.route}`);
    const path = join(root, `n${index}.conf`);
    writeFileSync(
      path,
      [
        `server_name: n${index}`,
        `listen: 127.0.0.1:${port.client}`,
        `http: 127.0.0.1:${port.monitor}`,
        `jetstream { store_dir: "${join(root, `store-${index}`)}" }`,
        ...(nodes > 1 ? [`cluster { name: test, listen: 127.0.0.1:${port.route}, routes: [${routes.join(", ")}] }`] : []),
      ].join("\n"),
    );
    return path;
  });
  const processes: (ChildProcess | null)[] = configs.map(() => null);
  const logs: string[] = configs.map(() => "");

  const start = async (index: number): Promise<void> => {
    const child = spawn(NATS_SERVER, ["-c", configs[index]!], { stdio: ["ignore", "ignore", "pipe"] });
    child.stderr!.on("data", (chunk: Buffer) => {
      logs[index] = (logs[index]! + chunk.toString()).slice(-8192);
    });
    processes[index] = child;
    await waitHealthy(ports[index]!.monitor, child, () => logs[index]!);
  };
  const stop = async (index: number): Promise<void> => {
    const child = processes[index];
    processes[index] = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGKILL");
    await exited;
  };
  const close = async (): Promise<void> => {
    await Promise.all(processes.map((_, index) => stop(index)));
    rmSync(root, { recursive: true, force: true });
  };
  try {
    // All at once: a clustered JetStream elects its meta leader only when a quorum is up.
    await Promise.all(configs.map((_, index) => start(index)));
  } catch (error) {
    await close();
    throw error;
  }
  const urls = ports.map((port) => `nats://127.0.0.1:${port.client}`);
  return { urls, url: urls.join(","), stop, start, close, [Symbol.asyncDispose]: close };
}

/** Polls the monitoring port's JetStream health check until it answers 200 (bounded: 30 s), or the server exits. */
async function waitHealthy(monitorPort: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  let exited = false;
  child.once("exit", () => (exited = true));
  while (Date.now() < deadline) {
    if (exited) throw new Error(`nats-server exited during start: ${log()}`);
    const healthy = await fetch(`http://127.0.0.1:${monitorPort}/healthz?js-enabled-only=true`).then(
      (response) => response.ok,
      () => false,
    );
    if (healthy) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nats-server did not become healthy within 30 s: ${log()}`);
}

/** A port the kernel has just handed out (bound and released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}
