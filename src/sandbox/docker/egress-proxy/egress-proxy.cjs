"use strict";
// The egress proxy of one task: the only way out of the task's internal Docker
// network. It admits HTTP (absolute-form requests) and HTTPS (CONNECT) to the
// host:port pairs on the task's allow-list, resolves allowed names itself, and
// connects to the exact address it checked (no second lookup to rebind). Inside
// a CONNECT tunnel it reads the client's TLS ClientHello and refuses a server
// name (SNI) other than the CONNECT host. Every decision is reported as one
// JSON line on stdout, read by the runner.
//
// Started by `node -e` (docker/inline-script.ts) in its own container (the sandbox image),
// with RUNNER_PROXY_CONFIG set; without it (unit tests `require` this file)
// only the decision functions are exported.

const dns = require("node:dns");
const http = require("node:http");
const net = require("node:net");

// Address ranges that are never "the internet" (IANA special-purpose
// registries, RFC 6890 and successors). An allowed name resolving into one of
// them is refused unless the task lists the range in allow_cidrs.
const NON_PUBLIC_V4 = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];
const NON_PUBLIC_V6 = [
  // No ::ffff:0:0/96 here: Node's BlockList checks IPv4 addresses against IPv6
  // rules in that mapped form, so it would match every IPv4 address. Mapped
  // addresses are unwrapped and checked as IPv4 instead (mappedV4).
  ["::", 128],
  ["::1", 128],
  ["64:ff9b::", 96],
  ["64:ff9b:1::", 48],
  ["100::", 64],
  ["2001::", 23],
  ["2001:db8::", 32],
  ["2002::", 16],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
];

function blockListOf(v4, v6) {
  const list = new net.BlockList();
  for (const [address, prefix] of v4) list.addSubnet(address, prefix, "ipv4");
  for (const [address, prefix] of v6) list.addSubnet(address, prefix, "ipv6");
  return list;
}

const nonPublic = blockListOf(NON_PUBLIC_V4, NON_PUBLIC_V6);

/** The IPv4 address inside a v4-mapped IPv6 address (::ffff:a.b.c.d), else null. */
function mappedV4(address) {
  const match = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return match ? match[1] : null;
}

function addressAllowed(address, config) {
  const family = net.isIP(address);
  if (family === 0) return false;
  const v4 = family === 6 ? mappedV4(address) : address;
  const [checked, type] = v4 ? [v4, "ipv4"] : [address, "ipv6"];
  if (config.allowedRanges && config.allowedRanges.check(checked, type)) return true;
  return !nonPublic.check(checked, type);
}

function buildConfig(raw) {
  const allowedRanges = new net.BlockList();
  for (const cidr of raw.allow_cidrs || []) {
    const [address, prefix] = cidr.split("/");
    const family = net.isIP(address) === 6 ? "ipv6" : "ipv4";
    allowedRanges.addSubnet(address, Number(prefix), family);
  }
  return { rules: raw.rules, allowedRanges, listing: raw.rules.map(describeRule).join(", ") };
}

function describeRule(rule) {
  const name = rule.wildcard ? `*.${rule.name}` : rule.name;
  return rule.ports ? `${name}:${rule.ports.join("|")}` : name;
}

/**
 * Decides from the name alone: a refusal reason, or null when the name and
 * port are on the allow-list. Names are compared lower-case without one
 * trailing dot; `*.example.org` matches names ending in `.example.org` only.
 */
function checkName(host, port, config) {
  if (typeof host !== "string" || host.length === 0) return "no host name";
  if (/[\x00-\x20\x7f]/.test(host)) return "host name contains control characters, spaces or NUL";
  if (host.startsWith("[") || host.endsWith("]")) {
    return net.isIP(host.slice(1, -1)) !== 0 ? "IP literals are refused; use a host name on the allow-list" : "malformed host name";
  }
  const bare = host;
  if (net.isIP(bare) !== 0) return "IP literals are refused; use a host name on the allow-list";
  if (/^[0-9.]+$/.test(bare) || /^0x/i.test(bare)) return "numeric host names are refused";
  const name = bare.toLowerCase().replace(/\.$/, "");
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(name)) return "malformed host name";
  if (!Number.isInteger(port) || port < 1 || port > 65535) return "bad port";
  for (const rule of config.rules) {
    const nameMatches = rule.wildcard ? name.endsWith(`.${rule.name}`) : name === rule.name;
    if (!nameMatches) continue;
    const ports = rule.ports || [80, 443];
    if (ports.includes(port)) return null;
  }
  return "not on this task's network allow-list";
}

function lookupAll(host) {
  return new Promise((resolve, reject) => {
    dns.lookup(host, { all: true, verbatim: true }, (error, addresses) => (error ? reject(error) : resolve(addresses)));
  });
}

/**
 * Full decision for host:port: `{ address }` to connect to, or `{ reason }`.
 * Every resolved address must be allowed (a name that also points into a
 * private range is refused: DNS answers may rotate).
 */
async function decide(host, port, config, lookup = lookupAll) {
  const refused = checkName(host, port, config);
  if (refused) return { reason: refused };
  let addresses;
  try {
    addresses = await lookup(host.toLowerCase().replace(/\.$/, ""));
  } catch (error) {
    return { reason: `cannot resolve host name (${error.code || error.message})` };
  }
  if (!addresses.length) return { reason: "host name has no address" };
  const bad = addresses.find((entry) => !addressAllowed(entry.address, config));
  if (bad) return { reason: `resolves to non-public address ${bad.address}` };
  return { address: addresses[0].address };
}

// ---------------------------------------------------------------- the first bytes of a CONNECT tunnel

/**
 * How many of a tunnel's first bytes the proxy holds back while it waits for a
 * whole ClientHello (records and their headers included). Clients send 0.5 to
 * 2 KiB (a post-quantum key share, X25519MLKEM768, adds 1.2 KiB); 16 KiB is
 * one full TLS record (2^14 bytes, RFC 8446 section 5.1). A hello that does
 * not fit is refused.
 */
const MAX_CLIENT_HELLO_BYTES = 16384;
const RECORD_HANDSHAKE = 22; // RFC 8446 section 5.1, ContentType.handshake
const HANDSHAKE_CLIENT_HELLO = 1; // RFC 8446 section 4, HandshakeType.client_hello
const EXTENSION_SERVER_NAME = 0x0000; // RFC 6066 section 3
const EXTENSION_ENCRYPTED_CLIENT_HELLO = 0xfe0d; // RFC 9849 (TLS Encrypted Client Hello), section 5
const NAME_TYPE_HOST_NAME = 0; // RFC 6066 section 3

class MalformedHello extends Error {}

/**
 * Reads the TLS ClientHello at the start of a tunnel's client bytes
 * (`bytes`: a Buffer holding everything the client has sent so far).
 *
 * Returns one of
 *   `{ kind: "not-tls" }`: the first byte is not a handshake record (22);
 *   `{ kind: "incomplete" }`: a ClientHello has begun and more bytes are needed;
 *   `{ kind: "hello", serverName, ech }`: `serverName` is the host_name of the
 *     server_name extension (a latin1 string, as sent) or null when there is
 *     none; `ech` tells whether an encrypted_client_hello extension is present;
 *   `{ kind: "malformed", detail }`: not a ClientHello a TLS server would take,
 *     or one larger than MAX_CLIENT_HELLO_BYTES (with its record headers).
 * Never throws.
 *
 * Formats: records, RFC 8446 section 5.1 (a handshake message may span
 * several records, and no other record type may come between them);
 * ClientHello, RFC 8446 section 4.1.2; extensions, section 4.2 (at most one
 * of each type); server_name, RFC 6066 section 3 (at most one host_name).
 * Stricter than a server where a difference could be exploited: a duplicate
 * extension, a second or unknown name type, or bytes past the declared
 * lengths are refused, so that no server can read a name other than the one
 * checked here.
 *
 * Hand-written: the proxy runs the sandbox image's Node with the standard
 * library only (no npm package can enter its container unbundled, see
 * docs/network.md "Network allow-list"), and Node's tls module reads a ClientHello
 * only by answering it as a TLS server (SNICallback), which tells nothing of
 * encrypted_client_hello and would make OpenSSL's leniency the rule.
 */
function readClientHello(bytes) {
  if (bytes.length === 0) return { kind: "incomplete" };
  if (bytes[0] !== RECORD_HANDSHAKE) return { kind: "not-tls" };
  const fragments = [];
  let available = 0;
  let total = null; // of the ClientHello message, header included, once its header has arrived
  let offset = 0;
  // Records up to the one completing the ClientHello; what follows is not judged.
  while (bytes.length - offset >= 5 && (total === null || available < total)) {
    if (bytes[offset] !== RECORD_HANDSHAKE) return malformed("a record of another type came before the ClientHello was complete");
    if (bytes[offset + 1] !== 3) return malformed(`record version ${bytes[offset + 1]}.${bytes[offset + 2]}`);
    const length = bytes.readUInt16BE(offset + 3);
    if (length === 0) return malformed("an empty handshake record");
    if (length > 16384) return malformed(`a record of ${length} bytes (at most 16384)`);
    const fragment = bytes.subarray(offset + 5, Math.min(offset + 5 + length, bytes.length));
    fragments.push(fragment);
    available += fragment.length;
    offset += 5 + length;
    if (total === null && available >= 4) {
      const head = Buffer.concat(fragments, 4);
      if (head[0] !== HANDSHAKE_CLIENT_HELLO) return malformed(`handshake message type ${head[0]} where a ClientHello (1) must be`);
      total = 4 + head.readUIntBE(1, 3);
      if (total + 5 > MAX_CLIENT_HELLO_BYTES) return malformed(`a ClientHello of ${total} bytes (at most ${MAX_CLIENT_HELLO_BYTES - 5})`);
    }
  }
  if (total !== null && available >= total) {
    try {
      return { kind: "hello", ...readClientHelloBody(Buffer.concat(fragments, total)) };
    } catch (error) {
      if (error instanceof MalformedHello) return malformed(error.message);
      throw error;
    }
  }
  if (bytes.length >= MAX_CLIENT_HELLO_BYTES) return malformed(`no complete ClientHello within ${MAX_CLIENT_HELLO_BYTES} bytes`);
  return { kind: "incomplete" };
}

function malformed(detail) {
  return { kind: "malformed", detail };
}

/** The fields of a whole ClientHello handshake message (header included) that the tunnel check needs; throws MalformedHello. */
function readClientHelloBody(message) {
  let position = 4;
  const take = (count, what) => {
    if (position + count > message.length) throw new MalformedHello(`${what} runs past the end of the ClientHello`);
    const field = message.subarray(position, position + count);
    position += count;
    return field;
  };
  const vector = (lengthBytes, what) => take(take(lengthBytes, `the length of ${what}`).readUIntBE(0, lengthBytes), what);
  take(2, "legacy_version");
  take(32, "random");
  if (vector(1, "legacy_session_id").length > 32) throw new MalformedHello("legacy_session_id longer than 32 bytes");
  const suites = vector(2, "cipher_suites");
  if (suites.length < 2 || suites.length % 2 !== 0) throw new MalformedHello("cipher_suites of odd or zero length");
  if (vector(1, "legacy_compression_methods").length < 1) throw new MalformedHello("no compression method");
  // Extensions are optional before TLS 1.3 (RFC 5246 section 7.4.1.2): no extensions, no server name.
  if (position === message.length) return { serverName: null, ech: false };
  const extensions = vector(2, "extensions");
  if (position !== message.length) throw new MalformedHello("bytes after the extensions");
  const seen = new Set();
  let serverName = null;
  let at = 0;
  while (at < extensions.length) {
    if (at + 4 > extensions.length) throw new MalformedHello("a truncated extension header");
    const type = extensions.readUInt16BE(at);
    const length = extensions.readUInt16BE(at + 2);
    if (at + 4 + length > extensions.length) throw new MalformedHello(`extension ${type} runs past the extensions`);
    if (seen.has(type)) throw new MalformedHello(`extension ${type} appears twice`);
    seen.add(type);
    if (type === EXTENSION_SERVER_NAME) serverName = readServerName(extensions.subarray(at + 4, at + 4 + length));
    at += 4 + length;
  }
  return { serverName, ech: seen.has(EXTENSION_ENCRYPTED_CLIENT_HELLO) };
}

/** The host_name of a server_name extension's ServerNameList (RFC 6066 section 3), as a latin1 string; throws MalformedHello. */
function readServerName(data) {
  if (data.length < 2 || data.readUInt16BE(0) !== data.length - 2) throw new MalformedHello("a server_name list whose length does not match its extension");
  let name = null;
  let at = 2;
  while (at < data.length) {
    if (at + 3 > data.length) throw new MalformedHello("a truncated server_name entry");
    const type = data[at];
    const length = data.readUInt16BE(at + 1);
    if (at + 3 + length > data.length) throw new MalformedHello("a server_name entry runs past its list");
    if (type !== NAME_TYPE_HOST_NAME) throw new MalformedHello(`server_name type ${type} (only host_name, 0, exists)`);
    if (name !== null) throw new MalformedHello("two host names in server_name");
    if (length === 0) throw new MalformedHello("an empty host name in server_name");
    name = data.toString("latin1", at + 3, at + 3 + length);
    at += 3 + length;
  }
  if (name === null) throw new MalformedHello("an empty server_name list");
  return name;
}

/** A TLS alert record (RFC 8446 section 6): fatal `description`. Sent in place of the server's answer to a refused ClientHello. */
function tlsAlert(description) {
  return Buffer.from([21, 3, 3, 0, 2, 2, description]);
}
// RFC 8446 section 6.2 (unrecognized_name: RFC 6066 section 3).
const ALERT_UNRECOGNIZED_NAME = tlsAlert(112);
const ALERT_ACCESS_DENIED = tlsAlert(49);
const ALERT_DECODE_ERROR = tlsAlert(50);

/** Host names compare in ASCII lower case without one trailing dot (RFC 6066 section 3: SNI is ASCII, without the dot). */
function comparableName(name) {
  return name.replace(/[A-Z]+/g, (letters) => letters.toLowerCase()).replace(/\.$/, "");
}

/** `text` in double quotes with every character outside printable ASCII escaped (\uXXXX), C1 controls included. */
function quoted(text) {
  return JSON.stringify(text).replace(/[\u007f-\uffff]/g, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * The verdict on the first bytes a client sent into a tunnel to `connectHost`
 * (as in the CONNECT request):
 *   `{ verdict: "wait" }`: a ClientHello has begun (or nothing came yet);
 *   `{ verdict: "forward" }`: not TLS, or a ClientHello naming the CONNECT
 *     host or no name at all (the server then picks its default name, on the
 *     address the allow-list admitted);
 *   `{ verdict: "refuse", reason, alert }`: another server name, an
 *     encrypted_client_hello (its inner name cannot be checked), or a
 *     malformed or oversized ClientHello; `alert` is the TLS alert to send.
 */
function judgeTunnelStart(bytes, connectHost) {
  const hello = readClientHello(bytes);
  if (hello.kind === "incomplete") return { verdict: "wait" };
  if (hello.kind === "not-tls") return { verdict: "forward" };
  if (hello.kind === "malformed") return { verdict: "refuse", reason: `malformed TLS ClientHello: ${hello.detail}`, alert: ALERT_DECODE_ERROR };
  if (hello.serverName !== null && comparableName(hello.serverName) !== comparableName(connectHost)) {
    const shown = hello.serverName.length > 255 ? `${hello.serverName.slice(0, 255)}...` : hello.serverName;
    return {
      verdict: "refuse",
      reason: `TLS server name ${quoted(shown)} does not match the CONNECT host ${quoted(connectHost)}`,
      alert: ALERT_UNRECOGNIZED_NAME,
    };
  }
  if (hello.ech) {
    return {
      verdict: "refuse",
      reason: "TLS ClientHello carries encrypted_client_hello, which hides the server name from the check",
      alert: ALERT_ACCESS_DENIED,
    };
  }
  return { verdict: "forward" };
}

function report(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function refusalBody(host, port, reason, config) {
  return (
    `agent-runner egress proxy: refused ${host}:${port}: ${reason}.\n` +
    `This task may reach only: ${config.listing || "(nothing)"} (ports 80 and 443 unless a port is given).\n` +
    "Other hosts, IP literals, other ports and private addresses are blocked by design.\n"
  );
}

function parseAuthority(authority) {
  const match = /^(\[[^\]]*\]|[^:]*)(?::(\d+))?$/.exec(authority || "");
  if (!match) return null;
  return { host: match[1], port: match[2] === undefined ? 443 : Number(match[2]) };
}

/**
 * Holds the client's bytes of an established tunnel (`head`: what came with
 * the CONNECT request) until judgeTunnelStart decides on them; then forwards
 * them and pipes the rest, or sends the refusal's TLS alert and closes both
 * sides without writing a byte upstream. `reportDecision(event, reason?)` reports the
 * verdict ("allowed" | "denied"). Only the first flight is judged: the check
 * is about the name a TLS server is asked for, which the ClientHello carries.
 */
function guardTunnel(client, upstream, head, connectHost, reportDecision) {
  let pending = head && head.length ? Buffer.from(head) : Buffer.alloc(0);
  const judge = (clientEnded) => {
    const verdict = judgeTunnelStart(pending, connectHost);
    if (verdict.verdict === "wait" && !clientEnded) return;
    client.removeListener("data", onData);
    client.removeListener("end", onEnd);
    if (verdict.verdict === "wait") {
      // The client half-closed before it sent anything (passed on), or gave up
      // in the middle of a ClientHello (which is not: it was never judged).
      upstream.end();
      return;
    }
    if (verdict.verdict === "refuse") {
      reportDecision("denied", verdict.reason);
      upstream.unpipe(client);
      upstream.destroy();
      // Closed once the alert is out, whether or not the client closes its side.
      client.end(verdict.alert, () => client.destroy());
      return;
    }
    upstream.write(pending);
    pending = null;
    if (clientEnded) upstream.end();
    else client.pipe(upstream);
    // After the bytes are on their way: the report is a synchronous write to a pipe.
    reportDecision("allowed");
  };
  const onData = (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    judge(false);
  };
  const onEnd = () => judge(true);
  client.on("data", onData);
  client.on("end", onEnd);
  if (pending.length) judge(false);
}

function startServer(config, listenAddress, listenPort) {
  const server = http.createServer(async (request, response) => {
    let url;
    try {
      url = new URL(request.url);
    } catch {
      response.writeHead(400, { "content-type": "text/plain" });
      response.end("agent-runner egress proxy: only absolute-form proxy requests (http://host/path) are served\n");
      return;
    }
    if (url.protocol !== "http:") {
      response.writeHead(400, { "content-type": "text/plain" });
      response.end(`agent-runner egress proxy: ${url.protocol} is not proxied; use CONNECT for https\n`);
      return;
    }
    const host = url.hostname;
    const port = url.port ? Number(url.port) : 80;
    const decision = await decide(host, port, config);
    if (decision.reason) {
      report({ event: "denied", method: request.method, host, port, reason: decision.reason });
      response.writeHead(403, { "content-type": "text/plain" });
      response.end(refusalBody(host, port, decision.reason, config));
      return;
    }
    report({ event: "allowed", method: request.method, host, port });
    const headers = { ...request.headers };
    delete headers["proxy-connection"];
    delete headers["proxy-authorization"];
    const upstream = http.request(
      {
        host: decision.address,
        port,
        method: request.method,
        path: `${url.pathname}${url.search}`,
        headers: { ...headers, host: url.host },
        setHost: false,
      },
      (upstreamResponse) => {
        response.writeHead(upstreamResponse.statusCode || 502, upstreamResponse.headers);
        upstreamResponse.pipe(response);
      },
    );
    upstream.on("error", (error) => {
      if (!response.headersSent) response.writeHead(502, { "content-type": "text/plain" });
      response.end(`agent-runner egress proxy: ${host}:${port}: ${error.message}\n`);
    });
    request.pipe(upstream);
  });

  server.on("connect", async (request, client, head) => {
    // Node hands the socket over without an error listener: a client reset
    // (e.g. after our 403) must not take the proxy down.
    let upstream = null;
    client.on("error", () => upstream && upstream.destroy());
    const authority = parseAuthority(request.url);
    const host = authority ? authority.host : String(request.url);
    const port = authority ? authority.port : 0;
    const decision = authority ? await decide(host, port, config) : { reason: "malformed CONNECT target" };
    if (decision.reason) {
      report({ event: "denied", method: "CONNECT", host, port, reason: decision.reason });
      const body = refusalBody(host, port, decision.reason, config);
      client.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
      return;
    }
    // One decision event per CONNECT: refused by its first bytes, or allowed
    // once they pass (or once the tunnel closes before the client said anything).
    let decided = false;
    const reportDecision = (event, reason) => {
      if (decided) return;
      decided = true;
      report(reason ? { event, method: "CONNECT", host, port, reason } : { event, method: "CONNECT", host, port });
    };
    // Connected before the first bytes are judged, so that an unreachable host
    // is still a 502 naming the error, and protocols whose server speaks first
    // (SMTP, FTP, MySQL) work; the upstream learns of a TCP connection to an
    // address the allow-list admitted, and not one byte of the client's until
    // they pass (see guardTunnel).
    upstream = net.connect({ host: decision.address, port }, () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      upstream.pipe(client);
      guardTunnel(client, upstream, head, host, reportDecision);
    });
    upstream.on("error", (error) => {
      client.end(
        `HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nagent-runner egress proxy: ${host}:${port}: ${error.message}\n`,
      );
    });
    upstream.on("close", () => reportDecision("allowed"));
    client.on("close", () => reportDecision("allowed"));
  });

  // Node's parser rejects requests it cannot parse (NUL or control characters
  // in the target) before our handlers run: refuse them visibly all the same.
  // One verdict per connection: bytes that arrive after the refusal (a request
  // split over several packets) can make the parser fail again on the same socket.
  const judged = new WeakSet();
  server.on("clientError", (error, socket) => {
    socket.on("error", () => undefined);
    // Already answered: the refusal is on its way and the socket closes after it.
    if (judged.has(socket)) return;
    judged.add(socket);
    // A client that went away, or timed out, made no request to judge.
    if (!error.rawPacket || error.code === "ECONNRESET" || error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
      socket.destroy();
      return;
    }
    if (error.code === "HPE_HEADER_OVERFLOW") {
      socket.end("HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
      return;
    }
    const line = (error.rawPacket ? error.rawPacket.toString("latin1") : "").split("\r\n")[0];
    const [method = "?", target = ""] = line.split(" ");
    const authority = method === "CONNECT" ? parseAuthority(target) : null;
    const shown = JSON.stringify(authority ? authority.host : target).slice(1, -1);
    const port = authority ? authority.port : 0;
    const reason = /[\x00-\x20\x7f]/.test(target) ? "host name contains control characters, spaces or NUL" : "malformed request";
    report({ event: "denied", method, host: shown, port, reason });
    if (socket.writable) {
      const body = `agent-runner egress proxy: refused ${shown}:${port}: ${reason}.\n`;
      socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    }
  });
  server.listen(listenPort, listenAddress, () => report({ event: "ready", port: listenPort }));
  // The runner holds our stdin; when it goes away, so do we.
  process.stdin.resume();
  process.stdin.on("end", () => process.exit(0));
}

module.exports = { checkName, decide, addressAllowed, buildConfig, parseAuthority, readClientHello, judgeTunnelStart, MAX_CLIENT_HELLO_BYTES };

if (process.env.RUNNER_PROXY_CONFIG) {
  if (!process.env.RUNNER_PROXY_LISTEN) throw new Error("RUNNER_PROXY_LISTEN (the task-network address) is required");
  startServer(buildConfig(JSON.parse(process.env.RUNNER_PROXY_CONFIG)), process.env.RUNNER_PROXY_LISTEN, Number(process.env.RUNNER_PROXY_PORT || 3128));
}
