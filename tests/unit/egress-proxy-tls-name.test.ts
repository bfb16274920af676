/**
 * The egress proxy's check of the first bytes of a CONNECT tunnel (issue 10,
 * item 12): a TLS ClientHello whose server name (SNI) is not the CONNECT host
 * is refused. Real ClientHellos come from Node's own `tls.connect`, captured by
 * a net.Server on 127.0.0.1; edge cases are built byte by byte after RFC 8446
 * section 4.1.2 and RFC 6066 section 3.
 */
import { createRequire } from "node:module";
import { beforeAll, describe, expect, it } from "vitest";
import { captureClientHello } from "../helpers/loopback-tls.js";

const require = createRequire(import.meta.url);
// The proxy is plain CommonJS that runs inside its container; required here, it only exports its decisions.
const proxy = require("../../src/sandbox/docker/egress-proxy/egress-proxy.cjs") as {
  readClientHello(
    bytes: Buffer,
  ): { kind: "not-tls" | "incomplete" } | { kind: "hello"; serverName: string | null; ech: boolean } | { kind: "malformed"; detail: string };
  judgeTunnelStart(bytes: Buffer, connectHost: string): { verdict: "wait" | "forward" } | { verdict: "refuse"; reason: string; alert: Buffer };
  MAX_CLIENT_HELLO_BYTES: number;
};

const UNRECOGNIZED_NAME = Buffer.from([21, 3, 3, 0, 2, 2, 112]);
const ACCESS_DENIED = Buffer.from([21, 3, 3, 0, 2, 2, 49]);
const DECODE_ERROR = Buffer.from([21, 3, 3, 0, 2, 2, 50]);

// ---------------------------------------------------------------- hand-built messages

function u16(value: number): Buffer {
  const bytes = Buffer.alloc(2);
  bytes.writeUInt16BE(value);
  return bytes;
}

function vector16(data: Buffer): Buffer {
  return Buffer.concat([u16(data.length), data]);
}

function extension(type: number, data: Buffer): Buffer {
  return Buffer.concat([u16(type), vector16(data)]);
}

/** A server_name extension (RFC 6066 section 3) with these entries ([name_type, name]). */
function serverNameExtension(...entries: [number, string][]): Buffer {
  const list = Buffer.concat(entries.map(([type, name]) => Buffer.concat([Buffer.from([type]), vector16(Buffer.from(name, "latin1"))])));
  return extension(0, vector16(list));
}

/** A ClientHello handshake message (RFC 8446 section 4.1.2); `extensions: null` leaves the block out (pre-TLS 1.3). */
function clientHelloMessage(extensions: Buffer[] | null, options: { trailing?: Buffer; type?: number } = {}): Buffer {
  const body = Buffer.concat([
    Buffer.from([3, 3]),
    Buffer.alloc(32, 7),
    Buffer.from([0]),
    vector16(Buffer.from([0x13, 0x01])),
    Buffer.from([1, 0]),
    extensions === null ? Buffer.alloc(0) : vector16(Buffer.concat(extensions)),
    options.trailing ?? Buffer.alloc(0),
  ]);
  const header = Buffer.from([options.type ?? 1, (body.length >> 16) & 0xff, (body.length >> 8) & 0xff, body.length & 0xff]);
  return Buffer.concat([header, body]);
}

function tlsRecord(fragment: Buffer, type = 22): Buffer {
  return Buffer.concat([Buffer.from([type, 3, 1]), u16(fragment.length), fragment]);
}

/** The handshake message carried by the (single) record `bytes`. */
function messageOf(bytes: Buffer): Buffer {
  return bytes.subarray(5, 5 + bytes.readUInt16BE(3));
}

/** `message` cut into handshake records of these fragment sizes (the last takes the rest). */
function inRecords(message: Buffer, sizes: number[]): Buffer {
  const records: Buffer[] = [];
  let offset = 0;
  for (const size of sizes) {
    if (offset >= message.length) break;
    records.push(tlsRecord(message.subarray(offset, offset + size)));
    offset += size;
  }
  if (offset < message.length) records.push(tlsRecord(message.subarray(offset)));
  return Buffer.concat(records);
}

const hello = (...extensions: Buffer[]) => tlsRecord(clientHelloMessage(extensions));

// ---------------------------------------------------------------- tests

let named: Buffer; // SNI api.example.com
let upper: Buffer; // SNI API.Example.COM
let dotted: Buffer; // SNI api.example.com.
let anonymous: Buffer; // no SNI (Node sends none for an IP address)

beforeAll(async () => {
  [named, upper, dotted, anonymous] = await Promise.all([
    captureClientHello({ servername: "api.example.com", ALPNProtocols: ["h2", "http/1.1"] }),
    captureClientHello({ servername: "API.Example.COM" }),
    captureClientHello({ servername: "api.example.com." }),
    captureClientHello({}),
  ]);
});

describe("reading a real ClientHello (Node's tls.connect)", () => {
  it("finds the server name, or none", () => {
    expect(proxy.readClientHello(named)).toEqual({ kind: "hello", serverName: "api.example.com", ech: false });
    expect(proxy.readClientHello(upper)).toEqual({ kind: "hello", serverName: "API.Example.COM", ech: false });
    expect(proxy.readClientHello(dotted)).toEqual({ kind: "hello", serverName: "api.example.com.", ech: false });
    expect(proxy.readClientHello(anonymous)).toEqual({ kind: "hello", serverName: null, ech: false });
  });

  it("admits a name equal to the CONNECT host in any letter case, with or without one trailing dot", () => {
    for (const bytes of [named, upper, dotted]) {
      for (const host of ["api.example.com", "API.EXAMPLE.COM", "api.example.com."]) {
        expect(proxy.judgeTunnelStart(bytes, host)).toEqual({ verdict: "forward" });
      }
    }
  });

  it("refuses another name with the names in the reason and an unrecognized_name alert", () => {
    expect(proxy.judgeTunnelStart(named, "other.example.com")).toEqual({
      verdict: "refuse",
      reason: 'TLS server name "api.example.com" does not match the CONNECT host "other.example.com"',
      alert: UNRECOGNIZED_NAME,
    });
    for (const host of ["example.com", "api.example.co", "x.api.example.com", "api.example.com.."]) {
      expect(proxy.judgeTunnelStart(named, host).verdict).toBe("refuse");
    }
  });

  it("forwards a ClientHello without a server name (the server answers for its default name, at the admitted address)", () => {
    expect(proxy.judgeTunnelStart(anonymous, "api.example.com")).toEqual({ verdict: "forward" });
  });

  it.each([
    ["matching", () => named, "api.example.com", "forward"],
    ["mismatching", () => named, "other.example.com", "refuse"],
    ["nameless", () => anonymous, "api.example.com", "forward"],
  ] as const)("split at every byte boundary, a %s hello waits until its last byte, then gets its verdict", (_, bytes, host, verdict) => {
    const whole = bytes();
    const early = [];
    for (let cut = 0; cut < whole.length; cut += 1) {
      const first = proxy.judgeTunnelStart(whole.subarray(0, cut), host);
      if (first.verdict !== "wait") early.push([cut, first.verdict]);
    }
    expect(early).toEqual([]);
    expect(proxy.judgeTunnelStart(whole, host).verdict).toBe(verdict);
  });

  it("reassembles a ClientHello spread over several records (down to one byte each), and waits at every boundary", () => {
    const message = messageOf(named);
    for (const stream of [inRecords(message, [1, 2, 3, 50]), inRecords(message, new Array(message.length).fill(1)), inRecords(message, [4, 100, 100])]) {
      expect(proxy.readClientHello(stream)).toEqual({ kind: "hello", serverName: "api.example.com", ech: false });
      expect(proxy.judgeTunnelStart(stream, "other.example.com").verdict).toBe("refuse");
      const early = [];
      for (let cut = 1; cut < stream.length; cut += 1) {
        const verdict = proxy.judgeTunnelStart(stream.subarray(0, cut), "other.example.com").verdict;
        if (verdict !== "wait") early.push(cut);
      }
      expect(early).toEqual([]);
    }
  });

  it("judges the ClientHello alone when more bytes follow it (a change_cipher_spec, early data)", () => {
    const after = Buffer.concat([named, tlsRecord(Buffer.from([1]), 20), tlsRecord(Buffer.alloc(40, 9), 23)]);
    expect(proxy.judgeTunnelStart(after, "api.example.com")).toEqual({ verdict: "forward" });
    expect(proxy.judgeTunnelStart(after, "other.example.com").verdict).toBe("refuse");
  });
});

describe("what is not a ClientHello to check", () => {
  it.each([
    ["plain HTTP", Buffer.from("GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n")],
    ["an SSH banner", Buffer.from("SSH-2.0-OpenSSH_9.2\r\n")],
    ["an SSLv2-format hello (no extensions, so no name)", Buffer.from([0x80, 0x2e, 0x01, 0x03, 0x01])],
    ["a lone NUL", Buffer.from([0])],
  ])("%s is forwarded as it is (not TLS)", (_, bytes) => {
    expect(proxy.readClientHello(bytes)).toEqual({ kind: "not-tls" });
    expect(proxy.judgeTunnelStart(bytes, "api.example.com")).toEqual({ verdict: "forward" });
  });
});

describe("refused first bytes", () => {
  const name = serverNameExtension([0, "api.example.com"]);

  it.each([
    ["an empty handshake record", tlsRecord(Buffer.alloc(0)), /empty handshake record/],
    [
      "an alert record where the hello continues",
      Buffer.concat([tlsRecord(clientHelloMessage([name]).subarray(0, 10)), tlsRecord(Buffer.from([2, 40]), 21)]),
      /another type/,
    ],
    ["a ServerHello", tlsRecord(clientHelloMessage([name], { type: 2 })), /handshake message type 2/],
    ["record version 2", Buffer.from([22, 2, 0, 0, 4, 1, 0, 0, 0]), /record version 2\.0/],
    ["a record over 2^14 bytes", Buffer.from([22, 3, 1, 0x40, 0x01]), /record of 16385 bytes/],
    ["bytes after the extensions", tlsRecord(clientHelloMessage([name], { trailing: Buffer.from([0]) })), /bytes after the extensions/],
    ["an extension longer than the block", tlsRecord(clientHelloMessage([Buffer.from([0, 0, 0, 9, 0])])), /runs past the extensions/],
    ["two server_name extensions", hello(name, serverNameExtension([0, "other.example.com"])), /extension 0 appears twice/],
    ["two host names in one extension", hello(serverNameExtension([0, "api.example.com"], [0, "other.example.com"])), /two host names/],
    ["an unknown name type", hello(serverNameExtension([0, "api.example.com"], [1, "other.example.com"])), /server_name type 1/],
    ["an empty server_name list", hello(extension(0, vector16(Buffer.alloc(0)))), /empty server_name list/],
    ["an empty host name", hello(serverNameExtension([0, ""])), /empty host name/],
    [
      "a server_name list length that lies",
      hello(extension(0, Buffer.concat([u16(40), Buffer.from([0]), vector16(Buffer.from("api.example.com"))]))),
      /does not match its extension/,
    ],
    ["a cipher_suites length past the end", tlsRecord(Buffer.from([1, 0, 0, 37, 3, 3, ...Buffer.alloc(32), 0, 0xff, 0xff])), /cipher_suites runs past/],
  ])("%s: refused as malformed, with a decode_error alert", (_, bytes, detail) => {
    const verdict = proxy.judgeTunnelStart(bytes, "api.example.com");
    expect(verdict).toMatchObject({ verdict: "refuse", alert: DECODE_ERROR });
    expect((verdict as { reason: string }).reason).toMatch(/^malformed TLS ClientHello: /);
    expect((verdict as { reason: string }).reason).toMatch(detail);
  });

  it("garbage after a handshake record header is refused once it is clearly no ClientHello", () => {
    const garbage = Buffer.concat([Buffer.from([22, 3, 3, 0, 200]), Buffer.from("this is not a hello at all, just text", "latin1")]);
    expect(proxy.judgeTunnelStart(garbage, "api.example.com").verdict).toBe("refuse");
  });

  it("a ClientHello announced larger than the buffer is refused from its first 9 bytes; one that never completes, at the cap", () => {
    const cap = proxy.MAX_CLIENT_HELLO_BYTES;
    expect(cap).toBe(16384);
    const announced = Buffer.from([22, 3, 1, 0x40, 0x00, 1, 0x00, 0x4e, 0x20]); // a 20000-byte ClientHello
    expect(proxy.judgeTunnelStart(announced, "api.example.com")).toMatchObject({
      verdict: "refuse",
      reason: "malformed TLS ClientHello: a ClientHello of 20004 bytes (at most 16379)",
    });
    // About 8000 bytes of hello in one-byte records take 6 times as many: refused when the buffer is full, not before.
    const trickle = inRecords(clientHelloMessage([name, extension(21, Buffer.alloc(7900))]), new Array(8000).fill(1));
    expect(proxy.judgeTunnelStart(trickle.subarray(0, cap - 1), "api.example.com")).toEqual({ verdict: "wait" });
    expect(proxy.judgeTunnelStart(trickle.subarray(0, cap), "api.example.com")).toMatchObject({
      verdict: "refuse",
      reason: `malformed TLS ClientHello: no complete ClientHello within ${cap} bytes`,
    });
  });

  it("a ClientHello that just fits the buffer (record header included) is judged", () => {
    const padding = proxy.MAX_CLIENT_HELLO_BYTES - 5 - clientHelloMessage([name, extension(21, Buffer.alloc(0))]).length;
    const largest = hello(name, extension(21, Buffer.alloc(padding)));
    expect(largest.length).toBe(proxy.MAX_CLIENT_HELLO_BYTES);
    expect(proxy.judgeTunnelStart(largest, "api.example.com")).toEqual({ verdict: "forward" });
    const larger = hello(name, extension(21, Buffer.alloc(padding + 1)));
    expect(proxy.judgeTunnelStart(larger, "api.example.com").verdict).toBe("refuse");
  });

  it("encrypted_client_hello is refused even under a matching outer name (the inner name cannot be checked)", () => {
    const ech = extension(0xfe0d, Buffer.alloc(40, 1));
    expect(proxy.readClientHello(hello(name, ech))).toEqual({ kind: "hello", serverName: "api.example.com", ech: true });
    expect(proxy.judgeTunnelStart(hello(name, ech), "api.example.com")).toEqual({
      verdict: "refuse",
      reason: "TLS ClientHello carries encrypted_client_hello, which hides the server name from the check",
      alert: ACCESS_DENIED,
    });
    expect(proxy.judgeTunnelStart(hello(ech), "api.example.com").verdict).toBe("refuse");
    expect((proxy.judgeTunnelStart(hello(serverNameExtension([0, "other.example.com"]), ech), "api.example.com") as { reason: string }).reason).toMatch(
      /does not match/,
    );
  });

  it("a name with NUL, control or non-ASCII bytes never matches, and the reason shows it escaped and cut", () => {
    const sneaky = hello(serverNameExtension([0, "api.example.com\u0000.evil.test"]));
    expect(proxy.judgeTunnelStart(sneaky, "api.example.com")).toMatchObject({
      verdict: "refuse",
      reason: 'TLS server name "api.example.com\\u0000.evil.test" does not match the CONNECT host "api.example.com"',
    });
    // Latin-1 capitals lower-case to non-ASCII letters, never to ASCII: no look-alike matches.
    expect(proxy.judgeTunnelStart(hello(serverNameExtension([0, "\u00c1pi.example.com"])), "api.example.com")).toMatchObject({
      verdict: "refuse",
      reason: 'TLS server name "\\u00c1pi.example.com" does not match the CONNECT host "api.example.com"',
    });
    // A C1 control (8-bit CSI) is escaped too: the reason reaches terminals.
    expect((proxy.judgeTunnelStart(hello(serverNameExtension([0, "a\u009b31mb"])), "api.example.com") as { reason: string }).reason).toMatch(
      /^TLS server name "a\\u009b31mb"/,
    );
    const long = proxy.judgeTunnelStart(hello(serverNameExtension([0, `${"a".repeat(1000)}.example.com`])), "api.example.com") as { reason: string };
    expect(long.reason).toBe(`TLS server name "${"a".repeat(255)}..." does not match the CONNECT host "api.example.com"`);
  });

  it("a ClientHello without extensions (before TLS 1.3) has no name and is forwarded", () => {
    expect(proxy.readClientHello(tlsRecord(clientHelloMessage(null)))).toEqual({ kind: "hello", serverName: null, ech: false });
    expect(proxy.judgeTunnelStart(tlsRecord(clientHelloMessage(null)), "api.example.com")).toEqual({ verdict: "forward" });
  });
});
