"use strict";
// The egress proxy of one task: the only way out of the task's internal Docker
// network. It admits HTTP (absolute-form requests) and HTTPS (CONNECT) to the
// host:port pairs on the task's allow-list, resolves allowed names itself, and
// connects to the exact address it checked (no second lookup to rebind). Every
// decision is reported as one JSON line on stdout, read by the runner.
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
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16],
  ["172.16.0.0", 12], ["192.0.0.0", 24], ["192.0.2.0", 24], ["192.88.99.0", 24], ["192.168.0.0", 16],
  ["198.18.0.0", 15], ["198.51.100.0", 24], ["203.0.113.0", 24], ["224.0.0.0", 4], ["240.0.0.0", 4],
];
const NON_PUBLIC_V6 = [
  // No ::ffff:0:0/96 here: Node's BlockList checks IPv4 addresses against IPv6
  // rules in that mapped form, so it would match every IPv4 address. Mapped
  // addresses are unwrapped and checked as IPv4 instead (mappedV4).
  ["::", 128], ["::1", 128], ["64:ff9b::", 96], ["64:ff9b:1::", 48], ["100::", 64],
  ["2001::", 23], ["2001:db8::", 32], ["2002::", 16], ["fc00::", 7], ["fe80::", 10], ["ff00::", 8],
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
    report({ event: "allowed", method: "CONNECT", host, port });
    upstream = net.connect({ host: decision.address, port }, () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head && head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on("error", (error) => {
      client.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nagent-runner egress proxy: ${host}:${port}: ${error.message}\n`);
    });
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

module.exports = { checkName, decide, addressAllowed, buildConfig, parseAuthority };

if (process.env.RUNNER_PROXY_CONFIG) {
  if (!process.env.RUNNER_PROXY_LISTEN) throw new Error("RUNNER_PROXY_LISTEN (the task-network address) is required");
  startServer(buildConfig(JSON.parse(process.env.RUNNER_PROXY_CONFIG)), process.env.RUNNER_PROXY_LISTEN, Number(process.env.RUNNER_PROXY_PORT || 3128));
}
