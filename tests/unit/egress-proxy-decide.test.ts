import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";

const require = createRequire(import.meta.url);
// The proxy is plain CommonJS that runs inside its container; required here, it only exports its decisions.
const proxy = require("../../src/sandbox/docker/egress-proxy/egress-proxy.cjs") as {
  checkName(host: string, port: number, config: unknown): string | null;
  decide(
    host: string,
    port: number,
    config: unknown,
    lookup: (host: string) => Promise<{ address: string; family: number }[]>,
  ): Promise<{ address?: string; reason?: string }>;
  buildConfig(raw: unknown): unknown;
  parseAuthority(authority: string): { host: string; port: number } | null;
};

const config = proxy.buildConfig({
  rules: [
    { name: "api.example.com", wildcard: false },
    { name: "example.org", wildcard: true },
    { name: "git.example.net", wildcard: false, ports: [8443] },
    { name: "tests.local", wildcard: false },
  ],
  allow_cidrs: ["172.28.0.0/16"],
});

const resolvesTo =
  (...addresses: string[]) =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));

describe("egress proxy decisions", () => {
  it.each([
    ["api.example.com", 443],
    ["API.Example.COM.", 80],
    ["a.example.org", 443],
    ["deep.a.example.org", 80],
    ["git.example.net", 8443],
  ])("admits %s:%i by name", (host, port) => {
    expect(proxy.checkName(host, port, config)).toBeNull();
  });

  it.each([
    ["example.org", 443, /allow-list/], // a wildcard does not match the bare domain
    ["badexample.org", 443, /allow-list/],
    ["api.example.com.evil.test", 443, /allow-list/],
    ["evilapi.example.com", 443, /allow-list/],
    ["api.example.com", 22, /allow-list/],
    ["git.example.net", 443, /allow-list/], // only its listed port
    ["93.184.216.34", 80, /IP literals/],
    ["[::1]", 443, /IP literals/],
    ["[::ffff:127.0.0.1]", 443, /IP literals/],
    ["2130706433", 80, /numeric/],
    ["0x7f000001", 80, /numeric/],
    ["api.example.com\u0000.evil.test", 443, /control characters/],
    ["api.example.com\r\nX: y", 443, /control characters/],
    ["api example.com", 443, /control characters/],
    ["api_example.com", 443, /malformed/],
    ["", 443, /no host/],
  ])("refuses %j:%i before any lookup", (host, port, reason) => {
    expect(proxy.checkName(host, port, config)).toMatch(reason);
  });

  it("connects to the checked address of an allowed public name", async () => {
    expect(await proxy.decide("api.example.com", 443, config, resolvesTo("93.184.216.34"))).toEqual({ address: "93.184.216.34" });
  });

  it.each([
    ["127.0.0.1"],
    ["10.1.2.3"],
    ["192.168.1.1"],
    ["169.254.169.254"],
    ["100.64.0.1"],
    ["0.0.0.0"],
    ["::1"],
    ["fe80::1"],
    ["fd00::1"],
    ["::ffff:169.254.169.254"],
  ])("refuses an allowed name resolving to the non-public address %s", async (address) => {
    const decision = await proxy.decide("api.example.com", 443, config, resolvesTo(address));
    expect(decision.reason).toBe(`resolves to non-public address ${address}`);
  });

  it("refuses a name when any of its addresses is non-public (rotation cannot sneak one in)", async () => {
    expect((await proxy.decide("api.example.com", 443, config, resolvesTo("93.184.216.34", "10.0.0.5"))).reason).toMatch(/10\.0\.0\.5/);
  });

  it("admits private addresses inside allow_cidrs, and only those", async () => {
    expect(await proxy.decide("tests.local", 80, config, resolvesTo("172.28.5.9"))).toEqual({ address: "172.28.5.9" });
    expect((await proxy.decide("tests.local", 80, config, resolvesTo("172.29.0.1"))).reason).toMatch(/non-public/);
  });

  it("never resolves a refused name", async () => {
    let lookups = 0;
    const lookup = async () => {
      lookups += 1;
      return [{ address: "93.184.216.34", family: 4 }];
    };
    await proxy.decide("denied.example", 443, config, lookup);
    await proxy.decide("1.2.3.4", 443, config, lookup);
    expect(lookups).toBe(0);
  });

  it("parses CONNECT authorities", () => {
    expect(proxy.parseAuthority("api.example.com:443")).toEqual({ host: "api.example.com", port: 443 });
    expect(proxy.parseAuthority("[::1]:8443")).toEqual({ host: "[::1]", port: 8443 });
    expect(proxy.parseAuthority("a:b:c")).toBeNull();
  });
});
