/**
 * Adversarial tests of the egress proxy and the task network (issue 3): each
 * test is an attack and asserts the secure behaviour.
 *
 * Network rule of this file (as in network-egress.test.ts): packets go only to
 * loopback and to containers on Docker networks this file creates (the "fake
 * internet" of tests/helpers/fake-internet.ts, plus an echo server and an
 * "attacker" container on it) or that the provider creates for it (task
 * networks). Every name the proxy may look up is served by those containers
 * (allowed.test, echo.test); every other name used here is refused by the
 * allow-list before any lookup. Names that would pass the name check but are
 * not served (e.g. `[allowed.test]`) are only checked in-process with a stub
 * lookup.
 */
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import { LABEL_RUN_ID } from "../../src/sandbox/docker/labels.js";
import type { ExecResult, NetworkEvent, Sandbox, SandboxSpec } from "../../src/sandbox/sandbox.js";
import { allowRules, createSandboxWorkspace, requireDocker, SANDBOX_IMAGE, testSandboxSpec } from "../helpers/docker.js";
import { createFakeInternet, demultiplex, FAKE_INTERNET_LABEL, type FakeInternet } from "../helpers/fake-internet.js";
import { randomToken, waitFor } from "./security-harness.js";

const RUN_PREFIX = `netattack-${process.pid}-${Date.now().toString(36)}`;
/** Hosts an `allowed` event may ever name in this file (lower-case, no trailing dot). */
const ALLOWED_HOSTS = new Set(["allowed.test", "echo.test"]);

let docker: Docker;
let internet: FakeInternet;
let provider: DockerSandboxProvider;
let workspace: { path: string; [Symbol.asyncDispose](): Promise<void> };
let counter = 0;
/** allow: allowed.test, echo.test: the sandbox most attacks run in. */
let main: NetSandbox;
/** allow: denied.test: another task. */
let other: NetSandbox;
const opened: NetSandbox[] = [];

// ---------------------------------------------------------------- scripts run in containers

/** An echo server for echo.test: answers each connection with the exact bytes it received (JSON), after 300 ms of quiet. */
const ECHO_SERVER = String.raw`
import json, socket, sys, threading
def handle(conn, addr, port):
    conn.settimeout(0.3)
    data = b""
    try:
        while len(data) < 262144:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, OSError):
        pass
    text = data.decode("latin1")
    sys.stderr.write("%s %d %s\n" % (addr[0], port, json.dumps(text)))
    sys.stderr.flush()
    body = json.dumps({"client": addr[0], "raw": text}).encode()
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    except OSError:
        pass
    conn.close()
def serve(port):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(512)
    while True:
        conn, addr = server.accept()
        threading.Thread(target=handle, args=(conn, addr, port), daemon=True).start()
for port in (80, 443):
    threading.Thread(target=serve, args=(port,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
`;

/**
 * Raw client run in a sandbox: sends each of REQS (JSON list of base64
 * requests) to the proxy on its own connection, concurrently, and prints a JSON
 * list of the answers (latin1; "<<idle>>" when the proxy kept the connection
 * open for IDLE seconds; "<<reset>>" on a reset). With RESET=1 it sends, then
 * resets the connection (SO_LINGER 0) without reading.
 */
const RAW_CLIENT = String.raw`
import base64, json, os, socket, struct, sys, threading
proxy = os.environ["HTTP_PROXY"].split("//", 1)[1].rstrip("/")
host, port = proxy.rsplit(":", 1)
requests = [base64.b64decode(item) for item in json.loads(os.environ["REQS"])]
idle = float(os.environ.get("IDLE", "1.5"))
answers = [None] * len(requests)
def run(index):
    out = b""
    try:
        s = socket.create_connection((host, int(port)), timeout=3)
        s.sendall(requests[index])
        if os.environ.get("RESET") == "1":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            answers[index] = "<<sent-and-reset>>"
            return
        s.settimeout(idle)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        out += b"<<idle>>"
    except ConnectionResetError:
        out += b"<<reset>>"
    except OSError as error:
        out += ("<<error %s>>" % error).encode()
    answers[index] = out.decode("latin1")
threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(answers))
`;

/**
 * A TLS client's first flight through a CONNECT tunnel: builds a real
 * ClientHello with python's ssl module (memory BIOs: no socket of its own)
 * for server name SNI, with the ALPN protocol TOKEN as a marker; re-frames it
 * into handshake records of RECORD bytes (RFC 8446 section 5.1 allows a
 * message to span records); sends `CONNECT TARGET`, waits for the proxy's
 * 200, sends the hello in separate writes cut at the offsets CUTS (TCP_NODELAY:
 * one segment each, unless the network merges them) and prints a JSON object:
 * the bytes sent after the 200 (base64) and everything that came back (latin1).
 */
const TLS_FIRST_FLIGHT = String.raw`
import base64, json, os, socket, ssl
proxy = os.environ["HTTP_PROXY"].split("//", 1)[1].rstrip("/")
host, port = proxy.rsplit(":", 1)
context = ssl.create_default_context()
context.set_alpn_protocols([os.environ["TOKEN"]])
incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
client = context.wrap_bio(incoming, outgoing, server_hostname=os.environ["SNI"])
try:
    client.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = outgoing.read()
message, size = hello[5:], int(os.environ["RECORD"])
hello = b"".join(b"\x16\x03\x01" + len(part).to_bytes(2, "big") + part for part in (message[i:i + size] for i in range(0, len(message), size)))
cuts = [0] + [int(cut) for cut in os.environ["CUTS"].split(",")] + [len(hello)]
s = socket.create_connection((host, int(port)), timeout=3)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (os.environ["TARGET"], os.environ["TARGET"])).encode())
answer = b""
while b"\r\n\r\n" not in answer:
    chunk = s.recv(65536)
    if not chunk:
        break
    answer += chunk
if answer.startswith(b"HTTP/1.1 200 "):
    for start, end in zip(cuts, cuts[1:]):
        s.sendall(hello[start:end])
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        answer += chunk
except (socket.timeout, ConnectionResetError):
    answer += b"<<no close>>"
print(json.dumps({"hello": base64.b64encode(hello).decode(), "answer": answer.decode("latin1")}))
`;

/** Opens N connections to the proxy that each send a partial request and then hold, for HOLD seconds. */
const SLOW_CLIENTS = String.raw`
import os, socket, sys, time
proxy = os.environ["HTTP_PROXY"].split("//", 1)[1].rstrip("/")
host, port = proxy.rsplit(":", 1)
held = []
for i in range(int(os.environ["N"])):
    s = socket.create_connection((host, int(port)), timeout=3)
    if i % 3 == 0:
        s.sendall(b"GET http://allowed.test/slow HTTP/1.1\r\nHost: allowed.test\r\nX-Slow: ")
    elif i % 3 == 1:
        s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\n")
    else:
        s.sendall(b"CONNECT allowed.test:80 HTTP/1.1\r\n\r\n")  # an idle, established tunnel
    held.append(s)
print("holding %d" % len(held), flush=True)
open("/tmp/holding", "w").close()
time.sleep(float(os.environ["HOLD"]))
print("closed", flush=True)
`;

/** Sends a DNS A query for QNAME to Docker's embedded resolver address 127.0.0.11 (loopback of the sandbox itself). */
const DNS_PROBE = String.raw`
import os, socket, struct
name = os.environ["QNAME"]
query = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\x00" + struct.pack("!HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1.5)
try:
    s.sendto(query, ("127.0.0.11", 53))
    data, _ = s.recvfrom(4096)
    answers = struct.unpack("!H", data[6:8])[0]
    print("answered rcode=%d answers=%d last=%s" % (data[3] & 15, answers, socket.inet_ntoa(data[-4:]) if answers else "-"))
except socket.timeout:
    print("no answer")
except OSError as error:
    print("error %s" % error)
`;

/** Connects to HOST on each of PORTS (TCP) and UDP 53; prints port=errno-name. */
const PORT_SCAN = String.raw`
import errno, os, socket
host = os.environ["HOST"]
out = []
for port in [int(p) for p in os.environ["PORTS"].split(",")]:
    s = socket.socket()
    s.settimeout(1.5)
    code = s.connect_ex((host, port))
    out.append("%d=%s" % (port, errno.errorcode.get(code, "OPEN" if code == 0 else str(code))))
    s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(1)
u.sendto(b"\x42\x42\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01", (host, 53))
try:
    u.recvfrom(512)
    out.append("udp53=ANSWERED")
except OSError:
    out.append("udp53=none")
print(" ".join(out))
`;

/** TCP connect to DST:80 with a loose source route through HOP (IP_OPTIONS LSRR: no capability needed). */
const SOURCE_ROUTE = String.raw`
import os, socket
option = bytes([1, 0x83, 7, 4]) + socket.inet_aton(os.environ["HOP"])
s = socket.socket()
s.settimeout(1.5)
try:
    s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, option)
    s.connect((os.environ["DST"], 80))
    s.sendall(("GET /%s HTTP/1.0\r\n\r\n" % os.environ["TOKEN"]).encode())
    print("connected %r" % s.recv(200))
except OSError as error:
    print("failed %s" % (type(error).__name__,))
`;

/** Receives UDP on 0.0.0.0:9999 for WAIT seconds; prints what arrived. */
const UDP_LISTEN = String.raw`
import os, socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 9999))
open("/tmp/udp-listening", "w").close()
s.settimeout(0.2)
got = []
end = time.time() + float(os.environ["WAIT"])
while time.time() < end:
    try:
        data, addr = s.recvfrom(2048)
        got.append("%s:%s" % (addr[0], data.decode("latin1")))
    except socket.timeout:
        pass
print("|".join(got))
`;

/**
 * A neighbour on the egress network with the default NET_RAW capability: sends
 * an Ethernet frame to the proxy's MAC carrying a UDP packet addressed to the
 * sandbox's task-network address. Only an IP-forwarding proxy delivers it.
 */
const FRAME_INJECTOR = String.raw`
import os, socket, struct, time
def checksum(data):
    total = sum((data[i] << 8) + data[i + 1] for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return ~total & 0xffff
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
source_mac = s.getsockname()[4]
payload = os.environ["PAYLOAD"].encode()
udp = struct.pack("!HHHH", 40000, 9999, 8 + len(payload), 0) + payload
header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, socket.inet_aton(os.environ["SRC"]), socket.inet_aton(os.environ["DST"]))
header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
frame = bytes.fromhex(os.environ["MAC"].replace(":", "")) + source_mac + b"\x08\x00" + header + udp
for _ in range(15):
    s.send(frame)
    time.sleep(0.1)
print("sent")
`;

// ---------------------------------------------------------------- helpers

interface NetSandbox {
  sandbox: Sandbox;
  runId: string;
  events: NetworkEvent[];
  /** What onProxyExit reported. */
  proxyExits: string[];
  sh(command: string, env?: Record<string, string>, timeoutMs?: number): Promise<ExecResult>;
  py(script: string, env?: Record<string, string>, timeoutMs?: number): Promise<string>;
  /** Each request on its own connection to the proxy, concurrently; the raw answers. */
  raw(requests: (string | Buffer)[], options?: { idle?: number; reset?: boolean }): Promise<string[]>;
  curl(args: string): Promise<{ status: number; body: string; stderr: string; ms: number }>;
  event(match: Partial<NetworkEvent>): Promise<NetworkEvent>;
  /** A request refused by name, then its event: every earlier event has arrived. */
  settle(): Promise<void>;
  proxy(): Promise<{ id: string; taskIp: string; egressIp: string; egressMac: string; running: boolean }>;
  containerIp(): Promise<string>;
}

const rules = allowRules;

function baseSpec(runId: string, allow: string[], events: NetworkEvent[], proxyExits: string[] = []): SandboxSpec {
  return testSandboxSpec(workspace.path, {
    runId,
    network: { rules: rules(allow), allowCidrs: [internet.subnet] },
    onNetworkEvent: (event) => events.push(event),
    onProxyExit: (detail) => proxyExits.push(detail),
  });
}

async function openSandbox(allow: string[]): Promise<NetSandbox> {
  counter += 1;
  const runId = `${RUN_PREFIX}-${counter}`;
  const events: NetworkEvent[] = [];
  const proxyExits: string[] = [];
  const sandbox = await provider.create(baseSpec(runId, allow, events, proxyExits));
  const taskNetwork = `agent-runner-${runId}-main`;
  const sh = (command: string, env?: Record<string, string>, timeoutMs = 30_000) => sandbox.exec({ command, env, timeoutMs });
  const py = async (script: string, env: Record<string, string> = {}, timeoutMs = 30_000) => {
    const result = await sh('exec python3 -c "$PY"', { ...env, PY: script }, timeoutMs);
    if (result.exitCode !== 0) throw new Error(`python failed (${result.exitCode}): ${result.stderr}`);
    return result.stdout.trim();
  };
  const self: NetSandbox = {
    sandbox,
    runId,
    events,
    proxyExits,
    sh,
    py,
    async raw(requests, options = {}) {
      const encoded = requests.map((request) => (typeof request === "string" ? Buffer.from(request, "latin1") : request).toString("base64"));
      const output = await py(RAW_CLIENT, { REQS: JSON.stringify(encoded), IDLE: String(options.idle ?? 1.5), RESET: options.reset ? "1" : "0" });
      return JSON.parse(output) as string[];
    },
    async curl(args) {
      const started = Date.now();
      const result = await sh(`curl -sS -m 5 -w '\\n%{http_code}' ${args}`);
      const cut = result.stdout.lastIndexOf("\n");
      return {
        status: Number(result.stdout.slice(cut + 1)) || 0,
        body: result.stdout.slice(0, Math.max(cut, 0)).trim(),
        stderr: result.stderr,
        ms: Date.now() - started,
      };
    },
    async event(match) {
      const matches = (event: NetworkEvent) => Object.entries(match).every(([key, value]) => event[key as keyof NetworkEvent] === value);
      return waitFor(`network event ${JSON.stringify(match)} (have ${JSON.stringify(events.slice(-10))})`, 5000, () => events.find(matches));
    },
    async settle() {
      const marker = `${randomToken("settle")}.test`;
      await sh(`curl -sS -m 5 -o /dev/null http://${marker}/`);
      await self.event({ host: marker, decision: "denied" });
    },
    async proxy() {
      const inspected = await docker.getContainer(`${taskNetwork}-proxy`).inspect();
      const networks = inspected.NetworkSettings.Networks;
      return {
        id: inspected.Id,
        taskIp: networks[taskNetwork]?.IPAddress ?? "",
        egressIp: networks[internet.network]?.IPAddress ?? "",
        egressMac: networks[internet.network]?.MacAddress ?? "",
        running: inspected.State.Running,
      };
    },
    async containerIp() {
      const inspected = await docker.getContainer(taskNetwork).inspect();
      return inspected.NetworkSettings.Networks[taskNetwork]!.IPAddress;
    },
  };
  opened.push(self);
  return self;
}

/** Runs a command in a container (docker exec, as the container's user); its combined output. */
async function dockerExec(containerId: string, command: string): Promise<string> {
  const exec = await docker.getContainer(containerId).exec({ Cmd: ["sh", "-c", command], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", resolve);
    stream.on("error", reject);
  });
  return demultiplex(Buffer.concat(chunks));
}

/** Runs a python script in a throwaway container on the fake internet (default capabilities, like any container on an egress network). */
async function runNeighbour(script: string, env: Record<string, string>): Promise<string> {
  const container = await docker.createContainer({
    Image: SANDBOX_IMAGE,
    Entrypoint: [],
    Cmd: ["python3", "-c", script],
    Env: Object.entries(env).map(([key, value]) => `${key}=${value}`),
    Labels: { [FAKE_INTERNET_LABEL]: RUN_PREFIX },
    HostConfig: { NetworkMode: internet.network },
  });
  try {
    await container.start();
    await container.wait();
    return demultiplex((await container.logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer);
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
  }
}

function statusOf(answer: string): number {
  return Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1] ?? 0);
}

/** No allowed event may name a host outside ALLOWED_HOSTS; nothing may have reached denied.test with `token`. */
async function expectNoEscape(ns: NetSandbox, token: string) {
  await ns.settle();
  const escaped = ns.events.filter((event) => event.decision === "allowed" && !ALLOWED_HOSTS.has(event.host.toLowerCase().replace(/\.$/, "")));
  expect(escaped).toEqual([]);
  expect(await internet.server("denied.test").log()).not.toContain(token);
  expect(await internet.server("api.allowed.test").log()).not.toContain(token);
}

/** The proxy still answers a plain allowed request. */
async function expectProxyServes(ns: NetSandbox) {
  const answer = await ns.curl("http://allowed.test/");
  expect({ status: answer.status, body: answer.body, stderr: answer.stderr }).toEqual({ status: 200, body: "hello-from-allowed.test", stderr: "" });
}

async function echoLog(): Promise<string> {
  const container = docker.getContainer(`fake-internet-${RUN_PREFIX}-echo`);
  return demultiplex((await container.logs({ stdout: false, stderr: true, follow: false })) as unknown as Buffer);
}

// ---------------------------------------------------------------- setup

beforeAll(async () => {
  docker = await requireDocker();
  internet = await createFakeInternet(docker, {
    id: RUN_PREFIX,
    image: SANDBOX_IMAGE,
    servers: [{ aliases: ["allowed.test"] }, { aliases: ["api.allowed.test"] }, { aliases: ["denied.test"] }],
  });
  const echo = await docker.createContainer({
    name: `fake-internet-${RUN_PREFIX}-echo`,
    Image: SANDBOX_IMAGE,
    Entrypoint: [],
    Cmd: ["python3", "-c", ECHO_SERVER],
    Labels: { [FAKE_INTERNET_LABEL]: RUN_PREFIX },
    HostConfig: { NetworkMode: internet.network, Memory: 128 * 1024 * 1024, PidsLimit: 600 },
    NetworkingConfig: { EndpointsConfig: { [internet.network]: { Aliases: ["echo.test"] } } },
  });
  await echo.start();
  provider = new DockerSandboxProvider({ docker, egressNetwork: internet.network });
  workspace = createSandboxWorkspace({ "README.md": "network attack tests\n" });
  [main, other] = await Promise.all([openSandbox(["allowed.test", "echo.test"]), openSandbox(["denied.test"])]);
  await waitFor("echo server ready", 10_000, async () =>
    demultiplex((await echo.logs({ stdout: true, stderr: false, follow: false })) as unknown as Buffer).includes("ready"),
  );
});

afterAll(async () => {
  await Promise.all(opened.map((ns) => ns.sandbox.close().catch(() => undefined)));
  await internet?.remove();
  await workspace?.[Symbol.asyncDispose]();
  if (docker) {
    const containers = (await docker.listContainers({ all: true, filters: { label: [LABEL_RUN_ID] } })).filter((info) =>
      info.Labels[LABEL_RUN_ID]!.startsWith(RUN_PREFIX),
    );
    const networks = (await docker.listNetworks({ filters: { label: [LABEL_RUN_ID] } })).filter((info) => info.Labels?.[LABEL_RUN_ID]?.startsWith(RUN_PREFIX));
    await Promise.all(
      containers.map((info) =>
        docker
          .getContainer(info.Id)
          .remove({ force: true })
          .catch(() => undefined),
      ),
    );
    await Promise.all(
      networks.map((info) =>
        docker
          .getNetwork(info.Id)
          .remove()
          .catch(() => undefined),
      ),
    );
    expect({ containers: containers.map((info) => info.Names), networks: networks.map((info) => info.Name) }).toEqual({ containers: [], networks: [] });
  }
});

// ---------------------------------------------------------------- HTTP (absolute-form) requests

describe("absolute-form requests", () => {
  it("userinfo, fragment, backslash, percent-encoding and IP spellings reach only the host the URL really names", async () => {
    const token = randomToken("url-");
    const get = (target: string) => `GET ${target} HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n`;
    const cases: [string, "refused" | "allowed.test" | "refused or allowed.test"][] = [
      [`http://allowed.test@denied.test/${token}`, "refused"],
      [`http://allowed.test:80@denied.test/${token}`, "refused"],
      [`http://denied.test#@allowed.test/${token}`, "refused"],
      [`http://denied.test\\@allowed.test/${token}`, "refused"],
      [`http://denied.test%23@allowed.test/${token}`, "refused or allowed.test"], // userinfo "denied.test#": may go to allowed.test
      [`http://allowed.test\\@denied.test/${token}`, "refused or allowed.test"], // WHATWG: "\" ends the host (path /@denied.test/)
      [`http://%64enied.test/${token}`, "refused"],
      [`http:denied.test/${token}`, "refused"],
      [`http:/denied.test/${token}`, "refused"],
      [`http://DENIED.TEST./${token}`, "refused"],
      [`http://allowed.test.denied.test/${token}`, "refused"],
      [`http://xn--llowed-3ve.test/${token}`, "refused"], // punycode look-alike
      [`http://\u0430llowed.test/${token}`, "refused"], // Cyrillic а (latin1-mangled on the wire)
      [`http://0x7f.1/${token}`, "refused"],
      [`http://2130706433/${token}`, "refused"],
      [`http://017700000001/${token}`, "refused"],
      [`http://[::ffff:7f00:1]/${token}`, "refused"],
      [`http://allowed.test:0/${token}`, "refused"],
      [`http://allowed.test:8443/${token}`, "refused"],
    ];
    const answers = await main.raw(cases.map(([target]) => Buffer.from(get(target), "utf8")));
    const outcome = cases.map(([target, expected], index) => {
      const answer = answers[index]!;
      const status = statusOf(answer);
      const seen =
        status === 403 || status === 400
          ? "refused"
          : /hello-from-allowed\.test|Error code: 404/.test(answer) && status !== 0
            ? "allowed.test"
            : `?? ${answer.slice(0, 80)}`;
      return [target, expected.split(" or ").includes(seen) ? expected : seen];
    });
    expect(outcome).toEqual(cases);
    await expectNoEscape(main, token);
  });

  it("the Host header and proxy credentials do not travel: the upstream sees the URL's host only", async () => {
    const token = randomToken("host-");
    const [answer] = await main.raw([
      `GET http://echo.test/${token} HTTP/1.1\r\nHost: denied.test\r\nHost: api.allowed.test\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: close\r\n\r\n`,
    ]);
    expect(statusOf(answer!)).toBe(200);
    const echoed = JSON.parse(answer!.slice(answer!.indexOf("\r\n\r\n") + 4)) as { raw: string };
    expect(echoed.raw).toMatch(new RegExp(`^GET /${token} HTTP/1\\.1\\r\\n`));
    expect(echoed.raw.toLowerCase()).toContain("\r\nhost: echo.test\r\n");
    expect(echoed.raw.toLowerCase()).not.toMatch(/denied\.test|api\.allowed\.test|proxy-authorization|proxy-connection/);
    await expectNoEscape(main, token);
  });

  it("keep-alive pipelining: every request on a connection first used for allowed.test is checked on its own", async () => {
    const token = randomToken("pipe-");
    const [answer] = await main.raw([
      `GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n` +
        `GET http://denied.test/${token}-a HTTP/1.1\r\nHost: denied.test\r\n\r\n` +
        `GET /${token}-b HTTP/1.1\r\nHost: denied.test\r\n\r\n` +
        `GET http://denied.test/${token}-c HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n`,
    ]);
    expect([...answer!.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => match[1])).toEqual(["200", "403", "400", "403"]);
    expect(answer).toContain("hello-from-allowed.test");
    await expectNoEscape(main, token);
  });

  it("request smuggling (CL+TE, duplicate or obfuscated framing) is rejected by the proxy and never reaches a server", async () => {
    const token = randomToken("smuggle-");
    const smuggled = `GET http://denied.test/${token} HTTP/1.1\r\nHost: denied.test\r\n\r\n`;
    const chunk = `0\r\n\r\n${smuggled}`;
    const head = (marker: string, framing: string) => `POST http://echo.test/${token}-${marker} HTTP/1.1\r\nHost: echo.test\r\n${framing}\r\n`;
    const variants: Record<string, string> = {
      "cl-te": head("cl-te", `Content-Length: ${chunk.length}\r\nTransfer-Encoding: chunked\r\n`) + chunk,
      "te-cl": head("te-cl", `Transfer-Encoding: chunked\r\nContent-Length: 4\r\n`) + chunk,
      "cl-cl": head("cl-cl", `Content-Length: 0\r\nContent-Length: ${smuggled.length}\r\n`) + smuggled,
      "te-te": head("te-te", `Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n`) + chunk,
      "te-x": head("te-x", `Transfer-Encoding: xchunked\r\n`) + chunk,
      "te-space": head("te-space", `Transfer-Encoding : chunked\r\n`) + chunk,
      "te-vtab": head("te-vtab", `Transfer-Encoding:\x0bchunked\r\n`) + chunk,
      "te-lf": head("te-lf", `Transfer-Encoding: chunked\n`) + chunk,
      "cl-plus": head("cl-plus", `Content-Length: +${smuggled.length}\r\n`) + smuggled,
      "chunk-size": head("chunk-size", `Transfer-Encoding: chunked\r\n`) + `0x0\r\n\r\n${smuggled}`,
      "http10-te": `POST http://echo.test/${token}-http10-te HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n${chunk}`,
    };
    const names = Object.keys(variants);
    const answers = await main.raw(names.map((name) => variants[name]!));
    const reachedEcho = await echoLog();
    const result = Object.fromEntries(
      names.map((name, index) => [name, { status: statusOf(answers[index]!), forwarded: reachedEcho.includes(`${token}-${name} `) }]),
    );
    // Ambiguous framing must be refused before anything is forwarded.
    expect(result).toEqual(
      Object.fromEntries(names.map((name) => [name, { status: expect.toSatisfy((status: number) => status >= 400 && status < 500), forwarded: false }])),
    );
    // Whatever was forwarded carried unambiguous framing.
    expect(reachedEcho.split("\n").filter((line) => line.includes(token) && /content-length/i.test(line) && /transfer-encoding/i.test(line))).toEqual([]);
    await expectNoEscape(main, token);
    await expectProxyServes(main);
  });

  it("a legitimate body that contains a request, followed by a pipelined request to denied.test: the body goes to echo.test only, the next request is refused", async () => {
    const token = randomToken("body-");
    const inner = `GET http://denied.test/${token} HTTP/1.1\r\nHost: denied.test\r\n\r\n`;
    const [answer] = await main.raw([
      `POST http://echo.test/${token}-outer HTTP/1.1\r\nHost: echo.test\r\nContent-Length: ${inner.length}\r\n\r\n${inner}` +
        `GET http://denied.test/${token}-next HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n`,
    ]);
    expect([...answer!.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1])).toEqual(["200", "403"]);
    expect(answer).toContain("refused denied.test:80");
    await expectNoEscape(main, token);
  });

  it("HTTP/1.0 without Host works for an allowed URL; origin-form, asterisk-form and other schemes get a 400 and reach nothing", async () => {
    const token = randomToken("form-");
    const requests = [
      `GET http://allowed.test/ HTTP/1.0\r\n\r\n`,
      `GET /${token}-origin HTTP/1.0\r\n\r\n`,
      `GET /${token}-origin11 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n`,
      `GET //denied.test/${token} HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n`,
      `OPTIONS * HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n`,
      `GET https://allowed.test/${token}-https HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n`,
      `GET ftp://allowed.test/${token} HTTP/1.1\r\nConnection: close\r\n\r\n`,
      `GET file:///etc/passwd HTTP/1.1\r\nConnection: close\r\n\r\n`,
      `GET ws://allowed.test/${token}-ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n`,
    ];
    const answers = await main.raw(requests);
    expect(answers.map(statusOf)).toEqual([200, 400, 400, 400, 400, 400, 400, 400, 400]);
    expect(answers[0]).toContain("hello-from-allowed.test");
    expect(answers[2]).toContain("only absolute-form proxy requests");
    expect(answers.slice(1).join("")).not.toContain("root:");
    expect(await internet.server("allowed.test").log()).not.toContain(token);
    await expectNoEscape(main, token);
  });

  it("a huge header or request line is answered 4xx and the proxy keeps serving", async () => {
    const token = randomToken("huge-");
    // (Each on its own: the requests travel in an environment variable, at most 128 KiB.)
    const answers = [
      ...(await main.raw([`GET http://allowed.test/${token} HTTP/1.1\r\nHost: allowed.test\r\nX-Big: ${"a".repeat(80_000)}\r\nConnection: close\r\n\r\n`])),
      ...(await main.raw([
        `GET http://allowed.test/${token}${"b".repeat(40_000)} HTTP/1.1\r\nConnection: close\r\n\r\n`,
        `CONNECT ${"c".repeat(20_000)}.allowed.test:443 HTTP/1.1\r\n\r\n`,
      ])),
      ...(await main.raw([
        `GET http://allowed.test/${token}-many HTTP/1.1\r\n${Array.from({ length: 3000 }, (_, index) => `X-${index}: y\r\n`).join("")}Connection: close\r\n\r\n`,
      ])),
    ];
    expect(answers.slice(0, 3).map((answer) => Math.floor(statusOf(answer) / 100))).toEqual([4, 4, 4]);
    expect(statusOf(answers[3]!)).toBeGreaterThan(0); // many headers: served or refused, but answered
    expect(await internet.server("allowed.test").log()).not.toContain(`${token}b`);
    await expectProxyServes(main);
  });
});

// ---------------------------------------------------------------- CONNECT

describe("CONNECT", () => {
  it("odd target forms are refused, or tunnel only to allowed.test on an allowed port", async () => {
    const hello = "GET / HTTP/1.0\r\n\r\n";
    const cases: [string, "refused" | "tunnel"][] = [
      ["allowed.test:443:80", "refused"],
      ["allowed.test:+443", "refused"],
      ["allowed.test:-443", "refused"],
      ["allowed.test:65536", "refused"],
      ["allowed.test:0", "refused"],
      ["allowed.test:99999999999999999999", "refused"],
      ["allowed.test:8443", "refused"],
      ["allowed.test:", "refused"],
      ["[::ffff:7f00:1]:80", "refused"],
      ["[::ffff:127.0.0.1]:443", "refused"],
      ["[::1]:443", "refused"],
      ["[fe80::1%25eth0]:443", "refused"],
      ["%61llowed.test:80", "refused"],
      ["allowed.test..:443", "refused"],
      [".allowed.test:443", "refused"],
      ["*.allowed.test:443", "refused"],
      ["a.allowed.test:443", "refused"],
      ["api.allowed.test:443", "refused"],
      ["allowed.test@denied.test:443", "refused"],
      ["denied.test:443@allowed.test", "refused"],
      ["allowed.test:443/", "refused"],
      ["http://allowed.test:443", "refused"],
      ["xn--llowed-3ve.test:443", "refused"],
      ["\u0430llowed.test:443", "refused"], // Cyrillic а, sent as UTF-8
      [`${"a".repeat(300)}.allowed.test:443`, "refused"],
      [`${"a.".repeat(200)}allowed.test:443`, "refused"],
      ["2130706433:443", "refused"],
      ["0x7f000001:443", "refused"],
      ["ALLOWED.TEST:443", "tunnel"],
      ["allowed.test.:443", "tunnel"],
      ["allowed.test:0443", "tunnel"],
      ["allowed.test", "tunnel"],
      ["allowed.test:80", "tunnel"],
    ];
    const answers = await main.raw(cases.map(([target]) => Buffer.from(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n${hello}`, "utf8")));
    const outcome = cases.map(([target], index) => {
      const answer = answers[index]!;
      if (/^HTTP\/1\.1 4\d\d /.test(answer) && !answer.includes("hello-from")) return [target, "refused"];
      if (answer.startsWith("HTTP/1.1 200 Connection Established\r\n\r\n") && answer.includes("hello-from-allowed.test")) return [target, "tunnel"];
      return [target, `?? ${answer.slice(0, 100)}`];
    });
    expect(outcome).toEqual(cases);
    await main.settle();
    // Every tunnel went to an allowed port.
    const tunnels = main.events.filter((event) => event.method === "CONNECT" && event.decision === "allowed");
    expect(tunnels.filter((event) => ![80, 443].includes(event.port))).toEqual([]);
    await expectNoEscape(main, "never-sent");
  });

  it("a bracketed host name ([allowed.test]) is not taken for the allowed name (decision checked in-process: never looked up for real)", async () => {
    // parseAuthority keeps "[allowed.test]" (its IPv6 branch takes any bracketed
    // text); checkName strips the brackets, finds no IP literal, and compares
    // the bare name with the allow-list; decide() then looks up the *bracketed*
    // string. A CONNECT to "[allowed.test]:443" is admitted by name and a name
    // that was never checked goes to the resolver.
    const require = createRequire(import.meta.url);
    const proxy = require("../../src/sandbox/docker/egress-proxy/egress-proxy.cjs") as {
      parseAuthority(authority: string): { host: string; port: number } | null;
      buildConfig(raw: unknown): unknown;
      decide(
        host: string,
        port: number,
        config: unknown,
        lookup: (host: string) => Promise<{ address: string; family: number }[]>,
      ): Promise<{ address?: string; reason?: string }>;
    };
    const config = proxy.buildConfig({ rules: [{ name: "allowed.test", wildcard: false }], allow_cidrs: [] });
    const lookedUp: string[] = [];
    const lookup = async (host: string) => {
      lookedUp.push(host);
      return [{ address: "93.184.216.34", family: 4 }]; // stub answer; nothing is sent anywhere
    };
    const authority = proxy.parseAuthority("[allowed.test]:443");
    const decision = authority ? await proxy.decide(authority.host, authority.port, config, lookup) : { reason: "malformed" };
    expect({ decision: decision.reason ? "refused" : "admitted", lookedUp }).toEqual({ decision: "refused", lookedUp: [] });
  });

  it("a TLS ClientHello naming another host inside a tunnel to an allowed host is refused before a byte goes upstream; a matching one passes unchanged", async () => {
    // In 100-byte records, and in segments cut inside the record header, the handshake header and the extensions.
    const flight = async (target: string, sni: string, token: string) =>
      JSON.parse(await main.py(TLS_FIRST_FLIGHT, { TARGET: target, SNI: sni, TOKEN: token, RECORD: "100", CUTS: "2,7,150,230" })) as {
        hello: string;
        answer: string;
      };
    const established = "HTTP/1.1 200 Connection Established\r\n\r\n";
    const before = main.events.length;

    const fronted = randomToken("front-");
    const refused = await flight("echo.test:443", "denied.test", fronted);
    // The client gets the 200 of the CONNECT, then a fatal unrecognized_name alert (RFC 8446 section 6), then the close.
    expect(refused.answer).toBe(`${established}\x15\x03\x03\x00\x02\x02\x70`);
    const refusal = await main.event({ decision: "denied", method: "CONNECT", host: "echo.test", port: 443 });
    expect(refusal.reason).toBe('TLS server name "denied.test" does not match the CONNECT host "echo.test"');

    const matching = randomToken("sni-");
    const passed = await flight("echo.test:443", "echo.test", matching);
    const hello = Buffer.from(passed.hello, "base64").toString("latin1");
    expect(passed.answer.startsWith(`${established}HTTP/1.1 200 OK\r\n`), passed.answer.slice(0, 200)).toBe(true);
    // echo.test received the client's ClientHello, records as framed, byte for byte (and nothing else).
    expect((JSON.parse(passed.answer.slice(passed.answer.indexOf("{"))) as { raw: string }).raw).toBe(hello);

    await main.settle();
    const fresh = main.events.slice(before).filter((event) => !event.host.startsWith("settle"));
    expect(fresh.map((event) => `${event.decision} ${event.method} ${event.host}:${event.port}`)).toEqual([
      "denied CONNECT echo.test:443",
      "allowed CONNECT echo.test:443",
    ]);
    const log = await echoLog();
    expect(log).toContain(matching);
    expect(log).not.toContain(fronted);
  });

  it("curl fronting with --connect-to (TLS name denied.test, CONNECT to allowed.test) fails with the TLS alert and reaches no server", async () => {
    const token = randomToken("connect-to-");
    const before = main.events.length;
    const logBefore = (await internet.server("allowed.test").log()).length;
    const result = await main.sh(`curl -sS -m 5 --connect-to denied.test:443:allowed.test:443 https://denied.test/${token}`);
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/unrecognized name/i);
    const refusal = await main.event({ decision: "denied", method: "CONNECT", host: "allowed.test", port: 443 });
    expect(refusal.reason).toBe('TLS server name "denied.test" does not match the CONNECT host "allowed.test"');
    expect(main.events.slice(before).filter((event) => event.decision === "allowed")).toEqual([]);
    // Nothing arrived at allowed.test (a ClientHello would be logged as a bad request), nor anywhere else.
    expect((await internet.server("allowed.test").log()).slice(logBefore)).toBe("");
    await expectNoEscape(main, token);
  });

  it("a second CONNECT (and a request to denied.test) inside a tunnel to allowed.test goes to that server, never to the proxy", async () => {
    const token = randomToken("nested-");
    const inside = `CONNECT denied.test:80 HTTP/1.1\r\nHost: denied.test:80\r\n\r\nGET http://denied.test/${token} HTTP/1.1\r\nHost: denied.test\r\n\r\n`;
    const before = main.events.length;
    const [early, late] = await main.raw([
      // Sent at once: the inner bytes arrive with the CONNECT (Node's `head`).
      `CONNECT echo.test:80 HTTP/1.1\r\nHost: echo.test:80\r\n\r\n${inside}`,
      `CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n${inside}`,
    ]);
    expect(early).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK/);
    expect(early).toContain(`CONNECT denied.test:80 HTTP/1.1`); // echo.test received the inner CONNECT verbatim
    expect(late).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\n/);
    expect(late).not.toContain("hello-from-denied");
    await main.settle();
    const fresh = main.events.slice(before).filter((event) => !event.host.startsWith("settle"));
    expect(fresh.map((event) => `${event.decision} ${event.method} ${event.host}:${event.port}`).sort()).toEqual([
      "allowed CONNECT allowed.test:80",
      "allowed CONNECT echo.test:80",
    ]);
    await expectNoEscape(main, token);
  });
});

// ---------------------------------------------------------------- resources and robustness

describe("robustness", () => {
  it("a client that resets mid-request is not logged as a refused request (no bogus network.denied)", async () => {
    const ns = await openSandbox(["allowed.test"]);
    await ns.raw([`GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX-Half: `, `CONNECT allowed.test:443 HTTP/1.1\r\nHost: al`], { reset: true });
    await ns.settle();
    const denied = ns.events.filter((event) => event.decision === "denied" && !event.host.startsWith("settle"));
    expect(denied).toEqual([]);
    await expectProxyServes(ns);
  });

  it("slowloris (half-sent requests, half-open CONNECTs, idle tunnels) does not wedge the proxy for other requests", async () => {
    const ns = await openSandbox(["allowed.test"]);
    const holding = ns.py(SLOW_CLIENTS, { N: "150", HOLD: "6" }, 30_000);
    await waitFor("slow clients connected", 15_000, async () => (await ns.sh("test -e /tmp/holding")).exitCode === 0);
    const started = Date.now();
    const during = await ns.curl("http://allowed.test/");
    const tunnel = await ns.curl("-p http://allowed.test:443/");
    expect({ status: during.status, body: during.body, tunnel: tunnel.status, fast: Date.now() - started < 3000 }).toEqual({
      status: 200,
      body: "hello-from-allowed.test",
      tunnel: 200,
      fast: true,
    });
    expect(await holding).toMatch(/holding 150[\s\S]*closed/);
    await expectProxyServes(ns);
  });

  it("200 concurrent requests are all served, and the proxy stays up", async () => {
    // Against echo.test (listen backlog 512): allowed.test's http.server has a
    // backlog of 5 and drops most of 200 simultaneous connections even without the proxy.
    const ns = await openSandbox(["allowed.test", "echo.test"]);
    const urls = Array.from({ length: 200 }, (_, index) => `-o /dev/null http://echo.test/?c=${index}`).join(" ");
    const started = Date.now();
    const result = await ns.sh(
      `curl -sS --no-progress-meter -m 30 -Z --parallel-max 200 --parallel-immediate -w '%{http_code} %{errormsg}\\n' ${urls}`,
      undefined,
      60_000,
    );
    const codes = result.stdout.trim().split("\n");
    const tally: Record<string, number> = {};
    for (const code of codes.map((line) => line.trim())) tally[code] = (tally[code] ?? 0) + 1;
    expect(tally).toEqual({ "200": 200 });
    expect(Date.now() - started).toBeLessThan(30_000);
    expect((await ns.proxy()).running).toBe(true);
    await expectProxyServes(ns);
  });
});

// ---------------------------------------------------------------- the network around the proxy

describe("network isolation", () => {
  it("the proxy listens on its task address and port 3128 only; its egress address is out of the sandbox's reach", async () => {
    const proxy = await main.proxy();
    const scan = await main.py(PORT_SCAN, { HOST: proxy.taskIp, PORTS: "1,22,53,80,443,3127,3129,8080,9229" });
    expect(scan).toBe(
      "1=ECONNREFUSED 22=ECONNREFUSED 53=ECONNREFUSED 80=ECONNREFUSED 443=ECONNREFUSED 3127=ECONNREFUSED 3129=ECONNREFUSED 8080=ECONNREFUSED 9229=ECONNREFUSED udp53=none",
    );
    // Its address on the egress network (the fake internet): no route from the sandbox, failing fast.
    const direct = await main.sh(`curl -sS -m 5 --noproxy '*' -o /dev/null -w '%{http_code}' http://${proxy.egressIp}:3128/; echo " rc=$?"`);
    expect(direct.stdout.trim()).toBe("000 rc=7");
    expect(direct.stderr).toContain(`Failed to connect to ${proxy.egressIp} port 3128`);
  });

  it("another task's sandbox reaches neither address of this task's proxy, nor this sandbox", async () => {
    const proxy = await main.proxy();
    const sandboxIp = await main.containerIp();
    const tries = await other.sh(
      [proxy.taskIp, proxy.egressIp, sandboxIp]
        .map(
          (address, index) =>
            `curl -sS -m 5 --noproxy '*' -o /dev/null http://${address}:${index === 2 ? 80 : 3128}/ 2>/tmp/e${index}; echo "$? $(cat /tmp/e${index})"`,
        )
        .join("; "),
    );
    const lines = tries.stdout.trim().split("\n");
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line).toMatch(/^7 curl: \(7\) Failed to connect/);
    // And through its own proxy, this task's addresses are IP literals: refused.
    const viaProxy = await other.curl(`http://${proxy.taskIp}:3128/`);
    expect(viaProxy.status).toBe(403);
  });

  it("Docker's embedded resolver at 127.0.0.11 knows only the task network: the proxy's name gives its task address", async () => {
    // The sandbox's resolv.conf names 127.0.0.1 (nothing), but on a user-defined
    // network Docker runs its embedded resolver in the sandbox's namespace at
    // 127.0.0.11:53 anyway. It answers the task network's own containers (the
    // proxy: harmless). Other names it would forward from the sandbox's own
    // namespace, which has no working route; that is not probed here, because
    // the probe itself would be a DNS query meant for the outside.
    const answer = await main.py(DNS_PROBE, { QNAME: `agent-runner-${main.runId}-main-proxy` });
    const proxy = await main.proxy();
    expect(answer).toBe(`answered rcode=0 answers=1 last=${proxy.taskIp}`);
  });

  it("no IPv6 at all in the sandbox (so no link-local/ULA path), and the task bridge has no host IPv4", async () => {
    const probe = await main.sh(
      "cat /proc/net/if_inet6; cat /proc/sys/net/ipv6/conf/*/disable_ipv6 | sort -u; " +
        `python3 -c "import socket; s=socket.socket(socket.AF_INET6); s.settimeout(1)
try:
    s.connect(('::1', 3128)); print('connected')
except OSError as e: print(type(e).__name__)"`,
    );
    // No address in if_inet6, IPv6 disabled everywhere, and ::1 does not exist (ConnectionRefusedError would mean it does).
    expect(probe.stdout.trim().split("\n")).toEqual(["1", "OSError"]);
    const [info] = await docker.listNetworks({ filters: { label: [`${LABEL_RUN_ID}=${main.runId}`] } });
    const bridge = execFileSync("ip", ["addr", "show", `br-${info!.Id.slice(0, 12)}`], { encoding: "utf8" });
    expect(bridge).not.toMatch(/\binet /);
  });

  it("the proxy does not route packets between its two networks (raw frame from an egress neighbour; LSRR source route from the sandbox)", async () => {
    const proxy = await main.proxy();
    const sandboxIp = await main.containerIp();
    const token = randomToken("l3-");
    // 1. A neighbour on the egress network (default capabilities, so NET_RAW) sends a UDP packet for the sandbox to the proxy's MAC.
    await main.sh("rm -f /tmp/udp-listening");
    const listening = main.py(UDP_LISTEN, { WAIT: "4" });
    await waitFor("the UDP listener bound", 10_000, async () => (await main.sh("test -e /tmp/udp-listening")).exitCode === 0);
    const neighbourIp = internet.server("denied.test").ip; // any source address of the egress network
    const sent = await runNeighbour(FRAME_INJECTOR, { MAC: proxy.egressMac, SRC: neighbourIp, DST: sandboxIp, PAYLOAD: token });
    expect(sent).toContain("sent");
    const received = await listening;
    // 2. The sandbox source-routes a TCP connection to allowed.test's address via the proxy (IP_OPTIONS needs no capability).
    const routed = await main.py(SOURCE_ROUTE, { HOP: proxy.taskIp, DST: internet.server("allowed.test").ip, TOKEN: token });
    const ipForward = (await dockerExec(proxy.id, "cat /proc/sys/net/ipv4/ip_forward")).trim();
    expect({ injected: received, sourceRouted: routed.startsWith("connected"), proxyIpForward: ipForward }).toEqual({
      injected: "",
      sourceRouted: false,
      proxyIpForward: "0",
    });
    expect(await internet.server("allowed.test").log()).not.toContain(token);
  });

  it("the proxy runs as nobody, with no capabilities, no-new-privileges and a read-only root file system", async () => {
    const proxy = await main.proxy();
    const inspected = await docker.getContainer(proxy.id).inspect();
    expect({
      user: inspected.Config.User,
      capDrop: inspected.HostConfig.CapDrop,
      capAdd: inspected.HostConfig.CapAdd ?? [],
      privileged: inspected.HostConfig.Privileged,
      readOnly: inspected.HostConfig.ReadonlyRootfs,
      securityOpt: inspected.HostConfig.SecurityOpt,
      mounts: inspected.Mounts,
    }).toEqual({ user: "65534:65534", capDrop: ["ALL"], capAdd: [], privileged: false, readOnly: true, securityOpt: ["no-new-privileges"], mounts: [] });
    const status = await dockerExec(
      proxy.id,
      'for p in /proc/[0-9]*; do [ "${p#/proc/}" = "$$" ] && continue; awk \'/^(Name|Uid|Gid|CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs):/ {printf "%s ", $0} END {print ""}\' $p/status 2>/dev/null; done; ' +
        "touch /probe 2>&1 | head -1; touch /tmp/probe 2>&1 | head -1",
    );
    const processes = status.split("\n").filter((line) => /Name:/.test(line));
    const nodeLike = processes.filter((line) => /Name:\s+(node|docker-init)/.test(line));
    expect(nodeLike.length).toBeGreaterThanOrEqual(2);
    for (const line of processes) {
      expect(line).toMatch(/Uid:\s+65534\s+65534\s+65534\s+65534/);
      expect(line).toMatch(/Gid:\s+65534\s+65534\s+65534\s+65534/);
      for (const set of ["CapEff", "CapPrm", "CapBnd", "CapAmb"]) expect(line).toMatch(new RegExp(`${set}:\\s+0000000000000000`));
      expect(line).toMatch(/NoNewPrivs:\s+1/);
    }
    expect(status).toMatch(/touch: cannot touch '\/probe': Read-only file system/);
    expect(status).toMatch(/touch: cannot touch '\/tmp\/probe': Read-only file system/);
  });
});

// ---------------------------------------------------------------- a dead proxy

describe("a killed proxy", () => {
  it("is noticed: the run learns of it (or it comes back), and the agent is not left with a bare 'Couldn't connect'", async () => {
    const ns = await openSandbox(["allowed.test"]);
    await expectProxyServes(ns);
    const proxy = await ns.proxy();
    await docker.getContainer(proxy.id).kill();
    await waitFor(
      "proxy gone",
      10_000,
      async () =>
        !(await ns
          .proxy()
          .then((state) => state.running)
          .catch(() => false)),
    );
    await waitFor("the runner told of the proxy's exit", 10_000, async () => ns.proxyExits.length > 0);
    const eventsBefore = ns.events.length;
    let execError = "";
    const after = await ns.curl("http://allowed.test/").catch((error: Error) => {
      execError = error.message;
      return { status: 0, body: "", stderr: "", ms: 0 };
    });
    const runnerTold = execError !== "" || ns.proxyExits.length > 0;
    const agentSaw = `${after.stderr}${after.body}`.trim();
    const state = { recovered: after.status === 200, runnerTold, agentToldItIsTheProxy: /egress proxy/i.test(agentSaw + execError) };
    expect(
      state.recovered || (state.runnerTold && state.agentToldItIsTheProxy),
      `${JSON.stringify(state)}; the agent saw: ${JSON.stringify(agentSaw)} after ${after.ms} ms; events since the kill: ${JSON.stringify(ns.events.slice(eventsBefore))}`,
    ).toBe(true);
    // close() after the proxy died still removes everything.
    await ns.sandbox.close();
    expect(await docker.listNetworks({ filters: { label: [`${LABEL_RUN_ID}=${ns.runId}`] } })).toEqual([]);
  });
});
