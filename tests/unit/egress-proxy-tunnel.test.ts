/**
 * The egress proxy's CONNECT tunnels, end to end on loopback: the proxy file
 * runs as its own process (as in its container, here on the host's Node),
 * admits `localhost` into 127.0.0.0/8 and ::1, and tunnels to servers this
 * file starts on the address `localhost` resolves to. Nothing leaves the
 * machine. The Docker version of the fronting refusal is in
 * tests/integration/network-attacks.test.ts.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { lookup } from "node:dns/promises";
import net from "node:net";
import { createInterface } from "node:readline";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { captureClientHello, freePort } from "../helpers/loopback-tls.js";

const PROXY = new URL("../../src/sandbox/docker/egress-proxy/egress-proxy.cjs", import.meta.url).pathname;

interface Upstream {
  port: number;
  /** What the first connection it accepts receives, once that connection closed. */
  received: Promise<Buffer>;
  server: net.Server;
}

interface ProxyEvent {
  event: string;
  method?: string;
  host?: string;
  port?: number;
  reason?: string;
}

let address: string;
let proxy: ChildProcess;
let proxyPort: number;
/** On the allow-list, but nothing listens there. */
let unreachablePort: number;
const events: ProxyEvent[] = [];
const eventWaiters: { port: number; resolve: (event: ProxyEvent) => void }[] = [];
let upstreams: Upstream[] = [];

/** A TCP server that records each connection's bytes; `greeting` is sent first on accept (a server that speaks first). */
async function startUpstream(greeting?: string): Promise<Upstream> {
  let settle: (bytes: Buffer) => void = () => undefined;
  const received = new Promise<Buffer>((resolve) => (settle = resolve));
  const server = net.createServer((socket) => {
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      if (greeting && Buffer.concat(chunks).includes("\n")) socket.end("bye\r\n");
    });
    socket.on("error", () => undefined);
    socket.on("close", () => settle(Buffer.concat(chunks)));
    socket.on("end", () => socket.end());
    if (greeting) socket.write(greeting);
  });
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  return { port: (server.address() as net.AddressInfo).port, received, server };
}

/** Sends `CONNECT localhost:<port>`; resolves with the socket (paused, holding what came after the answer's head) and the status line. */
async function openTunnel(port: number): Promise<{ socket: net.Socket; status: string }> {
  const socket = net.connect(proxyPort, "127.0.0.1");
  socket.setNoDelay(true);
  socket.write(`CONNECT localhost:${port} HTTP/1.1\r\nHost: localhost:${port}\r\n\r\n`);
  let head = Buffer.alloc(0);
  const status = await new Promise<string>((resolve, reject) => {
    socket.once("error", reject);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.removeListener("data", onData);
      socket.pause();
      const after = head.subarray(end + 4);
      head = head.subarray(0, end);
      if (after.length) socket.unshift(after);
      resolve(head.toString("latin1").split("\r\n")[0]!);
    };
    socket.on("data", onData);
  });
  return { socket, status };
}

/** Everything `socket` yields until it closes (its own reads, so later writes are unaffected). */
function readAll(socket: net.Socket): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", () => undefined);
    socket.on("close", () => resolve(Buffer.concat(chunks)));
    socket.resume();
  });
}

/** Writes `bytes` in the given pieces, each once the previous one was handed to the kernel (TCP_NODELAY: one segment each on loopback). */
async function writeInPieces(socket: net.Socket, bytes: Buffer, cuts: number[]): Promise<void> {
  const bounds = [0, ...cuts, bytes.length];
  for (let index = 0; index + 1 < bounds.length; index += 1) {
    const piece = bytes.subarray(bounds[index], bounds[index + 1]);
    await new Promise<void>((resolve, reject) => socket.write(piece, (error) => (error ? reject(error) : resolve())));
  }
}

/** The proxy's decision event for the CONNECT to `port`, once its line arrives. */
function eventFor(port: number): Promise<ProxyEvent> {
  const found = events.find((event) => event.port === port && event.method === "CONNECT");
  if (found) return Promise.resolve(found);
  return new Promise((resolve) => eventWaiters.push({ port, resolve }));
}

beforeAll(async () => {
  // The address the proxy will connect to for "localhost" (its first answer, as in decide()).
  address = (await lookup("localhost", { all: true, verbatim: true }))[0]!.address;
  proxyPort = await freePort();
  // One upstream per test (index = the test's), each on its own port of the allow-list; the fourth speaks first.
  upstreams = await Promise.all([startUpstream(), startUpstream(), startUpstream(), startUpstream("220 ready\r\n"), startUpstream(), startUpstream()]);
  unreachablePort = await freePort();
  const ports = [...upstreams.map((upstream) => upstream.port), unreachablePort];
  const config = { rules: [{ name: "localhost", wildcard: false, ports }], allow_cidrs: ["127.0.0.0/8", "::1/128"] };
  proxy = spawn(process.execPath, [PROXY], {
    env: { ...process.env, RUNNER_PROXY_CONFIG: JSON.stringify(config), RUNNER_PROXY_LISTEN: "127.0.0.1", RUNNER_PROXY_PORT: String(proxyPort) },
    stdio: ["pipe", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    proxy.once("exit", (code) => reject(new Error(`the proxy exited (${code})`)));
    createInterface({ input: proxy.stdout! }).on("line", (line) => {
      const event = JSON.parse(line) as ProxyEvent;
      if (event.event === "ready") return resolve();
      events.push(event);
      for (const waiter of eventWaiters.filter((candidate) => candidate.port === event.port && event.method === "CONNECT")) waiter.resolve(event);
    });
  });
});

afterAll(async () => {
  proxy?.stdin?.end();
  proxy?.kill();
  await Promise.all(upstreams.map((upstream) => new Promise((resolve) => upstream.server.close(resolve))));
});

const upstream = (index: number) => upstreams[index]!;

// Each test waits for sockets to close; a proxy that forwards what it should hold keeps them open.
describe("a CONNECT tunnel through the proxy process", { timeout: 10_000 }, () => {
  it("holds a ClientHello that arrives one byte per segment, then refuses its other name: an alert, and the server gets nothing", async () => {
    const hello = await captureClientHello({ servername: "other.example.com" });
    const target = upstream(0);
    const tunnel = await openTunnel(target.port);
    expect(tunnel.status).toBe("HTTP/1.1 200 Connection Established");
    const answer = readAll(tunnel.socket);
    await writeInPieces(
      tunnel.socket,
      hello,
      Array.from({ length: hello.length - 1 }, (_, index) => index + 1),
    );
    expect([...(await answer)]).toEqual([21, 3, 3, 0, 2, 2, 112]);
    expect(await target.received).toEqual(Buffer.alloc(0));
    expect(await eventFor(target.port)).toEqual({
      event: "denied",
      method: "CONNECT",
      host: "localhost",
      port: target.port,
      reason: 'TLS server name "other.example.com" does not match the CONNECT host "localhost"',
    });
  });

  it("forwards a matching ClientHello cut inside the record and handshake headers byte for byte, and what follows it", async () => {
    const hello = await captureClientHello({ servername: "LOCALHOST." });
    const target = upstream(1);
    const tunnel = await openTunnel(target.port);
    await writeInPieces(tunnel.socket, Buffer.concat([hello, Buffer.from("after the hello")]), [1, 4, 5, 7, 9, 60, hello.length]);
    tunnel.socket.end();
    expect((await target.received).equals(Buffer.concat([hello, Buffer.from("after the hello")]))).toBe(true);
    expect(await eventFor(target.port)).toEqual({ event: "allowed", method: "CONNECT", host: "localhost", port: target.port });
  });

  it("a real TLS client asking for another name fails with unrecognized_name", async () => {
    const target = upstream(2);
    const tunnel = await openTunnel(target.port);
    const error = await new Promise<NodeJS.ErrnoException>((resolve) => {
      const secure = tls.connect({ socket: tunnel.socket, servername: "other.example.com" });
      secure.on("error", resolve);
      secure.on("secureConnect", () => resolve(new Error("handshake completed") as NodeJS.ErrnoException));
    });
    expect(error.code).toBe("ERR_SSL_TLSV1_UNRECOGNIZED_NAME");
    expect(await target.received).toEqual(Buffer.alloc(0));
  });

  it("a server that speaks first is heard before the client says anything, and the client's answer still goes through", async () => {
    const target = upstream(3);
    const socket = net.connect(proxyPort, "127.0.0.1");
    socket.write(`CONNECT localhost:${target.port} HTTP/1.1\r\n\r\n`);
    let seen = "";
    await new Promise<void>((resolve) =>
      socket.on("data", (chunk: Buffer) => {
        seen += chunk.toString("latin1");
        if (seen.includes("220 ready\r\n")) resolve();
      }),
    );
    expect(seen).toBe("HTTP/1.1 200 Connection Established\r\n\r\n220 ready\r\n");
    const closed = new Promise((resolve) => socket.on("close", resolve));
    socket.write("QUIT\r\n");
    await closed;
    expect(seen.endsWith("bye\r\n")).toBe(true);
    expect((await target.received).toString()).toBe("QUIT\r\n");
    expect(await eventFor(target.port)).toMatchObject({ event: "allowed" });
  });

  it("a client that half-closes without a byte passes the close on (and the tunnel counts as allowed)", async () => {
    const target = upstream(4);
    const tunnel = await openTunnel(target.port);
    const answer = readAll(tunnel.socket);
    tunnel.socket.end();
    expect(await target.received).toEqual(Buffer.alloc(0));
    expect(await answer).toEqual(Buffer.alloc(0));
    expect(await eventFor(target.port)).toEqual({ event: "allowed", method: "CONNECT", host: "localhost", port: target.port });
  });

  it("a client that gives up in the middle of a ClientHello: the part never reaches the server", async () => {
    const hello = await captureClientHello({ servername: "localhost" });
    const target = upstream(5);
    const tunnel = await openTunnel(target.port);
    await writeInPieces(tunnel.socket, hello.subarray(0, 100), []);
    tunnel.socket.end();
    expect(await target.received).toEqual(Buffer.alloc(0));
    // Not a refusal: the client went away (as with a request cut short, no network.denied).
    expect(await eventFor(target.port)).toEqual({ event: "allowed", method: "CONNECT", host: "localhost", port: target.port });
  });

  it("an allowed host that refuses the connection is a 502 naming the error, as before the check", async () => {
    const tunnel = await openTunnel(unreachablePort);
    expect(tunnel.status).toBe("HTTP/1.1 502 Bad Gateway");
    tunnel.socket.destroy();
  });
});
