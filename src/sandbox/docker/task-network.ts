import { randomInt } from "node:crypto";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { privateDirectory } from "../../process/private-directory.js";
import { createInterface } from "node:readline";
import { PassThrough, type Duplex } from "node:stream";
import { fileURLToPath } from "node:url";
import type Docker from "dockerode";
import { SandboxError, errorMessage } from "../../errors.js";
import type { NetworkEvent, SandboxSpec } from "../sandbox.js";
import { INLINE_SCRIPT_VARIABLE, inlineScriptCommand } from "./inline-script.js";
import { ATTACHED_STDIO, resourceLabels } from "./labels.js";

const PROXY_FILE = fileURLToPath(new URL("./egress-proxy/egress-proxy.cjs", import.meta.url));
const PROXY_PORT = 3128;
/**
 * Task networks are /29s picked at random in 198.18.0.0/15 (RFC 2544's
 * benchmarking range: rarely used on real LANs, and the bridge gets no host
 * address anyway). The fixed subnet gives the proxy a known address (.2), so
 * the sandbox can be created while the proxy starts, and needs no DNS at all.
 */
const SUBNET_ATTEMPTS = 8;
/** Milliseconds to wait for the proxy's `ready` line. */
const PROXY_READY_TIMEOUT_MS = 30_000;

let cachedProxySource: string | null = null;
let resolvConfPath: string | null = null;

/** A resolv.conf naming only a local resolver that does not exist: every lookup fails at once. Made once per process. */
function noDnsResolvConf(): string {
  if (resolvConfPath === null) {
    const path = join(privateDirectory("agent-runner-resolv", 0o755), "resolv.conf");
    // Written anew by each runner process (same bytes, atomically: another
    // runner may be mounting it right now).
    const temporary = `${path}.${process.pid}`;
    writeFileSync(
      temporary,
      "# agent-runner: no DNS in the sandbox; the egress proxy resolves allowed names\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
      { mode: 0o644 },
    );
    renameSync(temporary, path);
    resolvConfPath = path;
  }
  return resolvConfPath;
}

/**
 * A task's network when it has an allow-list: an internal Docker network
 * (no route out, and `inhibit_ipv4` so the host's bridge address is not
 * reachable either) shared by the sandbox and an egress proxy container; the
 * proxy alone is also attached to the egress network (default `bridge`).
 */
export class TaskNetwork {
  private proxy: Docker.Container | null = null;
  private proxyStream: Duplex | null = null;
  private closing = false;
  /** Set when the proxy exited after it was ready (its last stderr); network requests then fail. */
  exitedDetail: string | null = null;

  private constructor(
    private readonly docker: Docker,
    readonly name: string,
    private readonly network: Docker.Network,
    /** The proxy's address on the task network (.2 of its /29). */
    readonly proxyAddress: string,
    /** The sandbox's address (.3). */
    readonly sandboxAddress: string,
  ) {}

  /**
   * Creates the internal network; `startProxy` must follow. Throws
   * SandboxError (and removes what it made) when Docker refuses.
   */
  static async create(docker: Docker, spec: SandboxSpec): Promise<TaskNetwork> {
    const name = `agent-runner-${spec.runId}-${spec.agentId}`;
    let lastError: unknown;
    for (let attempt = 0; attempt < SUBNET_ATTEMPTS; attempt += 1) {
      const block = randomInt(0, 2 ** 14) * 8; // /29 blocks in a /15
      const base = `198.${18 + (block >> 16)}.${(block >> 8) & 255}.${block & 255}`;
      const prefix = base.slice(0, base.lastIndexOf(".") + 1);
      const last = block & 255;
      try {
        const network = await docker.createNetwork({
          Name: name,
          Driver: "bridge",
          Internal: true,
          CheckDuplicate: true,
          Options: { "com.docker.network.bridge.inhibit_ipv4": "true" },
          IPAM: { Driver: "default", Config: [{ Subnet: `${base}/29`, Gateway: `${prefix}${last + 1}` }] },
          Labels: resourceLabels(spec),
        });
        return new TaskNetwork(docker, name, network, `${prefix}${last + 2}`, `${prefix}${last + 3}`);
      } catch (error) {
        lastError = error;
        // Only an overlap with another network is worth another subnet.
        if (!/overlap/i.test(errorMessage(error))) break;
      }
    }
    throw new SandboxError(`could not create the task network ${name}: ${errorMessage(lastError)}`, { cause: lastError, reason: "network_failed" });
  }

  /** Host file mounted read-only as the sandbox's /etc/resolv.conf. */
  get resolvConf(): string {
    return noDnsResolvConf();
  }

  /** The proxy URL the sandbox's HTTP(S)_PROXY variables point at. */
  get proxyUrl(): string {
    return `http://${this.proxyAddress}:${PROXY_PORT}`;
  }

  /**
   * Starts the egress proxy (our proxy script on the node of `proxyImage`, the
   * runner's own image, whatever the task's image is; an unprivileged user, no
   * capabilities) and resolves when it listens.
   */
  async startProxy(spec: SandboxSpec, egressNetwork: string, proxyImage: string): Promise<void> {
    cachedProxySource ??= readFileSync(PROXY_FILE, "utf8");
    const config = { rules: spec.network!.rules, allow_cidrs: spec.network!.allowCidrs };
    try {
      this.proxy = await this.docker.createContainer({
        name: `${this.name}-proxy`,
        Image: proxyImage,
        Cmd: inlineScriptCommand(),
        Entrypoint: [],
        User: "65534:65534",
        // It listens on its task-network address only: containers on the egress network cannot use it.
        Env: [
          `RUNNER_PROXY_CONFIG=${JSON.stringify(config)}`,
          `RUNNER_PROXY_PORT=${PROXY_PORT}`,
          `RUNNER_PROXY_LISTEN=${this.proxyAddress}`,
          `${INLINE_SCRIPT_VARIABLE}=${cachedProxySource}`,
        ],
        Labels: resourceLabels(spec),
        ...ATTACHED_STDIO,
        HostConfig: {
          NetworkMode: egressNetwork,
          CapDrop: ["ALL"],
          SecurityOpt: ["no-new-privileges"],
          Init: true,
          AutoRemove: true,
          PidsLimit: 64,
          Memory: 256 * 1024 * 1024,
          MemorySwap: 256 * 1024 * 1024,
          ReadonlyRootfs: true,
          // It relays at the application layer only: no IP forwarding between its two networks.
          Sysctls: { "net.ipv4.ip_forward": "0", "net.ipv6.conf.all.disable_ipv6": "1" },
        },
      });
      await this.network.connect({ Container: this.proxy.id, EndpointConfig: { IPAMConfig: { IPv4Address: this.proxyAddress } } });
      const stream = (await this.proxy.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as Duplex;
      this.proxyStream = stream;
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      this.docker.modem.demuxStream(stream, stdout, stderr);
      const stderrTail: string[] = [];
      stderr.on("data", (chunk: Buffer) => stderrTail.push(chunk.toString("utf8")));
      let isReady = false;
      const ready = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new SandboxError(`egress proxy did not start within ${PROXY_READY_TIMEOUT_MS} ms`, { reason: "egress_proxy_failed" })),
          PROXY_READY_TIMEOUT_MS,
        );
        stream.on("end", () => {
          clearTimeout(timer);
          const detail = stderrTail.join("").slice(-1000);
          if (!isReady) reject(new SandboxError(`egress proxy exited: ${detail}`, { reason: "egress_proxy_failed" }));
          else if (!this.closing) {
            this.exitedDetail = detail || "no output";
            spec.onProxyExit?.(this.exitedDetail);
          }
        });
        createInterface({ input: stdout }).on("line", (line) => {
          let message: { event?: string; method?: string; host?: string; port?: number; reason?: string };
          try {
            message = JSON.parse(line);
          } catch {
            return;
          }
          if (message.event === "ready") {
            clearTimeout(timer);
            isReady = true;
            resolve();
          } else if (message.event === "allowed" || message.event === "denied") {
            const event: NetworkEvent = { decision: message.event, method: String(message.method), host: String(message.host), port: Number(message.port) };
            if (message.reason) event.reason = message.reason;
            spec.onNetworkEvent?.(event);
          }
        });
      });
      ready.catch(() => undefined);
      await this.proxy.start();
      await ready;
    } catch (error) {
      throw error instanceof SandboxError
        ? error
        : new SandboxError(`could not start the egress proxy: ${errorMessage(error)}`, { cause: error, reason: "egress_proxy_failed" });
    }
  }

  /** Removes the proxy, then the network; the sandbox container must be gone first. Safe to call twice. */
  async close(): Promise<void> {
    await this.removeProxy();
    await this.removeNetwork();
  }

  /** Removes the proxy container (and waits until it is gone). Safe to call twice. */
  async removeProxy(): Promise<void> {
    this.closing = true;
    this.proxyStream?.destroy();
    this.proxyStream = null;
    const proxy = this.proxy;
    this.proxy = null;
    if (!proxy) return;
    await proxy.remove({ force: true }).catch(ignoreGone);
    await proxy.wait({ condition: "removed" }).catch(() => undefined);
  }

  /** Removes the network; every container on it must be gone. 404 (already gone) is fine. */
  async removeNetwork(): Promise<void> {
    await this.network.remove().catch((error: unknown) => {
      if ((error as { statusCode?: number }).statusCode !== 404) throw error;
    });
  }
}

function ignoreGone(error: unknown): void {
  const status = (error as { statusCode?: number }).statusCode;
  if (status !== 404 && status !== 409) throw error;
}
