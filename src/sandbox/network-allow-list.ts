import { isIP } from "node:net";

/** One allow-list rule: a host name (or every name under a domain), and its ports. */
export interface AllowRule {
  /** Lower-case host name; for a wildcard, the domain below which names match. */
  name: string;
  /** `*.example.org`: matches `a.example.org`, `a.b.example.org`, never `example.org` or `badexample.org`. */
  wildcard: boolean;
  /** Allowed ports; absent = 80 and 443. */
  ports?: number[];
}

const LABEL = "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?";
const HOST_NAME = new RegExp(`^${LABEL}(\\.${LABEL})*$`);

/**
 * Parses an allow-list entry: `api.example.com`, `*.example.org`,
 * `git.example.net:8443`. Returns the rule, or an error message naming what
 * is wrong and the expected form. IP literals are refused: the allow-list
 * names hosts (use allow_cidrs to let names resolve into private ranges).
 */
export function parseAllowEntry(entry: string): AllowRule | string {
  const bare = entry.trim().replace(/^\[(.*)\](:\d+)?$/, "$1");
  if (isIP(bare) !== 0) return `"${entry}": IP addresses are not allowed; name the host (and use allow_cidrs for private test ranges)`;
  const match = /^(\*\.)?([^:]+)(?::(\d+))?$/.exec(entry.trim());
  const expected = 'expected a host name like "api.example.com", "*.example.org" or "git.example.net:8443"';
  if (!match) return `"${entry}": ${expected}`;
  const [, star, rawName, rawPort] = match;
  const name = rawName!.toLowerCase().replace(/\.$/, "");
  if (isIP(name) !== 0 || /^[0-9.]+$/.test(name))
    return `"${entry}": IP addresses are not allowed; name the host (and use allow_cidrs for private test ranges)`;
  if (!HOST_NAME.test(name)) return `"${entry}": ${expected}`;
  if (star && !name.includes(".")) return `"${entry}": a wildcard needs a domain with a dot, like "*.example.org"`;
  const rule: AllowRule = { name, wildcard: Boolean(star) };
  if (rawPort !== undefined) {
    const port = Number(rawPort);
    if (port < 1 || port > 65535) return `"${entry}": port must be 1-65535`;
    rule.ports = [port];
  }
  return rule;
}

/** Checks a CIDR like `10.0.0.0/8` or `fd00::/8`; returns an error message or null. */
export function checkCidr(cidr: string): string | null {
  const [address, prefix, ...rest] = cidr.split("/");
  const family = isIP(address ?? "");
  const bits = Number(prefix);
  if (rest.length || family === 0 || !/^\d+$/.test(prefix ?? "") || bits > (family === 4 ? 32 : 128)) {
    return `"${cidr}": expected a CIDR range like "172.28.0.0/16" or "fd00::/8"`;
  }
  return null;
}

/** The entry as written in task.yaml form: `name`, `*.domain`, `name:port`. */
export function describeRule(rule: AllowRule): string {
  const name = rule.wildcard ? `*.${rule.name}` : rule.name;
  return rule.ports ? `${name}:${rule.ports.join("|")}` : name;
}
