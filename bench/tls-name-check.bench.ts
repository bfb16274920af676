/**
 * Cost of the egress proxy's TLS server-name check (issue 10, item 12):
 * `npx tsx bench/tls-name-check.bench.ts [--rounds=300] [--baseline=<git revision>]`
 *
 * Host only, loopback only: a Node TLS server on 127.0.0.1 (a throwaway
 * self-signed certificate for `localhost` from `openssl req`), and two egress
 * proxy processes on 127.0.0.1 run by this Node: the working tree's
 * egress-proxy.cjs ("with the check") and the same file at `--baseline`
 * (default e3bceb4, the commit before the check: "without"). One sample is a
 * new TCP connection to a proxy, `CONNECT localhost:<port>`, its 200, and a
 * whole TLS handshake through the tunnel, until the client's secureConnect.
 * The two proxies are sampled interleaved round-robin (bench/lib/stats.ts).
 * Then, in-process, judgeTunnelStart on one captured ClientHello (the check's
 * own CPU time).
 *
 * Network: 127.0.0.1 only. Cleanup: the proxies (they exit when their stdin
 * closes, and are killed by pid), the TLS server and the temporary directory
 * are removed in `finally`.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import tls from "node:tls";
import { fileURLToPath } from "node:url";
import { option, positiveOption } from "./lib/options.js";
import { fmt, interleave, median, p90, printTable } from "./lib/stats.js";
import { captureClientHello, freePort } from "../tests/helpers/loopback-tls.js";

const ROUNDS = positiveOption("rounds", 300);
const BASELINE = option("baseline") ?? "e3bceb4";
const PROXY_PATH = "src/sandbox/docker/egress-proxy/egress-proxy.cjs";
const REPOSITORY = fileURLToPath(new URL("..", import.meta.url));

async function startProxy(source: string, tlsPort: number): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const config = { rules: [{ name: "localhost", wildcard: false, ports: [tlsPort] }], allow_cidrs: ["127.0.0.0/8", "::1/128"] };
  const child = spawn(process.execPath, [source], {
    env: { ...process.env, RUNNER_PROXY_CONFIG: JSON.stringify(config), RUNNER_PROXY_LISTEN: "127.0.0.1", RUNNER_PROXY_PORT: String(port) },
    stdio: ["pipe", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`proxy ${source} exited (${code})`)));
    // Every decision is a line on stdout: read them all, so the pipe never fills.
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (line.includes('"ready"')) resolve();
    });
  });
  return { port, child };
}

/** CONNECT through the proxy, then a TLS handshake with the local server; resolves at secureConnect. */
async function handshakeThrough(proxyPort: number, tlsPort: number, ca: Buffer): Promise<void> {
  const socket = net.connect(proxyPort, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.write(`CONNECT localhost:${tlsPort} HTTP/1.1\r\nHost: localhost:${tlsPort}\r\n\r\n`);
    });
    let answer = "";
    const onData = (chunk: Buffer) => {
      answer += chunk.toString("latin1");
      if (!answer.includes("\r\n\r\n")) return;
      socket.removeListener("data", onData);
      if (!answer.startsWith("HTTP/1.1 200 ")) reject(new Error(`proxy answered ${answer.split("\r\n")[0]}`));
      else resolve();
    };
    socket.on("data", onData);
  });
  const secure = tls.connect({ socket, servername: "localhost", ca });
  try {
    await new Promise<void>((resolve, reject) => {
      secure.once("secureConnect", resolve);
      secure.once("error", reject);
    });
  } finally {
    secure.destroy();
    socket.destroy();
  }
}

async function main(): Promise<void> {
  const directory = mkdtempSync(join(tmpdir(), "agent-runner-bench-tls-"));
  const children: ChildProcess[] = [];
  let server: tls.Server | null = null;
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost",
        "-days",
        "1",
        "-keyout",
        join(directory, "key.pem"),
        "-out",
        join(directory, "cert.pem"),
      ],
      { stdio: "ignore" },
    );
    const cert = readFileSync(join(directory, "cert.pem"));
    const baselineSource = join(directory, "egress-proxy-baseline.cjs");
    writeFileSync(baselineSource, execFileSync("git", ["-C", REPOSITORY, "show", `${BASELINE}:${PROXY_PATH}`]));

    const tlsServer = tls.createServer({ key: readFileSync(join(directory, "key.pem")), cert }, (socket) => socket.on("error", () => undefined).end());
    server = tlsServer;
    tlsServer.on("tlsClientError", () => undefined);
    await new Promise<void>((resolve) => tlsServer.listen(0, "127.0.0.1", resolve));
    const tlsPort = (tlsServer.address() as net.AddressInfo).port;

    const checked = await startProxy(join(REPOSITORY, PROXY_PATH), tlsPort);
    const baseline = await startProxy(baselineSource, tlsPort);
    children.push(checked.child, baseline.child);

    console.log(
      `tls-name-check bench: ${ROUNDS} rounds, baseline ${BASELINE}, node ${process.version}, load ${loadavg()
        .map((load) => load.toFixed(2))
        .join(" ")}`,
    );
    const samples = await interleave(
      {
        [`without the check (${BASELINE})`]: () => handshakeThrough(baseline.port, tlsPort, cert),
        "with the check (working tree)": () => handshakeThrough(checked.port, tlsPort, cert),
        "direct, no proxy": async () => {
          const secure = tls.connect({ host: "127.0.0.1", port: tlsPort, servername: "localhost", ca: cert });
          await new Promise<void>((resolve, reject) => {
            secure.once("secureConnect", resolve);
            secure.once("error", reject);
          });
          secure.destroy();
        },
      },
      ROUNDS,
      20,
    );
    const [without, withCheck, direct] = Object.entries(samples);
    printTable("CONNECT + TLS handshake through the proxy (new connection each)", [
      { name: without![0], samples: without![1] },
      { name: withCheck![0], samples: withCheck![1], baseline: without![0] },
      { name: direct![0], samples: direct![1], baseline: without![0] },
    ]);
    console.log(`   added by the check (difference of medians): ${fmt(median(withCheck![1]) - median(without![1]))} ms`);

    // The check alone, in this process, on a ClientHello of this Node's.
    const proxy = createRequire(import.meta.url)(join(REPOSITORY, PROXY_PATH)) as { judgeTunnelStart(bytes: Buffer, host: string): { verdict: string } };
    const hello = await captureClientHello({ servername: "localhost" });
    const iterations = 20_000;
    const perCall: number[] = [];
    for (let batch = 0; batch < 20; batch += 1) {
      const started = performance.now();
      for (let index = 0; index < iterations / 20; index += 1) proxy.judgeTunnelStart(hello, "localhost");
      perCall.push(((performance.now() - started) * 1000) / (iterations / 20));
    }
    console.log(
      `\n== judgeTunnelStart on a ${hello.length}-byte ClientHello, in-process: median ${fmt(median(perCall))} µs per call (p90 of 20 batches ${fmt(p90(perCall))} µs)`,
    );
    console.log(
      `load after: ${loadavg()
        .map((load) => load.toFixed(2))
        .join(" ")}`,
    );
  } finally {
    for (const child of children) {
      child.stdin?.end();
      child.kill();
    }
    server?.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

await main();
