import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** A package index the user's own configuration names: the toolchain, the hosts to allow, and where they were found. */
export interface PackageIndex {
  tool: "npm" | "pip" | "apt" | "go";
  hosts: string[];
  /** Where the hosts come from, e.g. `npm config get registry`, `PIP_INDEX_URL`, `/etc/apt/sources.list`. */
  source: string;
}

export interface PackageIndexOptions {
  /** The environment to read (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_CONFIG_FILE, GOPROXY, XDG_CONFIG_HOME); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** The user's home directory (pip's user configuration files); default os.homedir(). */
  home?: string;
  /** Where the system configuration lives (`/etc`: pip.conf, apt's sources); tests give a directory of their own. */
  etc?: string;
  /**
   * npm's registry URL, or null when npm is not there. Default: `npm config
   * get registry` run in `home` (the user's and the global npmrc, never a
   * repository's), with `env`, at most 5 s.
   */
  npmRegistry?: () => string | null;
}

/**
 * The package indexes this machine's configuration names, for suggesting
 * `sandbox.network.allow` entries (`runner init`, and the hint of a command
 * that failed to resolve a name in a sandbox without network): npm's
 * registry (`npm config get registry`), pip's `index-url` and
 * `extra-index-url` (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL, else pip.conf:
 * PIP_CONFIG_FILE, `$XDG_CONFIG_HOME/pip/pip.conf` or `~/.config/pip/pip.conf`,
 * `~/.pip/pip.conf`, `/etc/pip.conf`, the first that sets it), apt's
 * sources (`/etc/apt/sources.list`, `sources.list.d/*.list` and `*.sources`)
 * and GOPROXY (its URLs; `direct` and `off` name no host). No host is built
 * in: a toolchain whose configuration names none is left out, so a team
 * behind a company mirror is told to allow its own hosts. Never throws: an
 * unreadable file or a missing npm counts as naming nothing.
 */
export function packageIndexHosts(options: PackageIndexOptions = {}): PackageIndex[] {
  const env = options.env ?? process.env;
  const home = options.home ?? homedir();
  const etc = options.etc ?? "/etc";
  const indexes: PackageIndex[] = [];
  const add = (tool: PackageIndex["tool"], urls: string[], source: string) => {
    const hosts = [...new Set(urls.map(hostOf).filter((host): host is string => host !== null))];
    if (hosts.length) indexes.push({ tool, hosts, source });
  };
  const npm = (options.npmRegistry ?? (() => npmConfigRegistry(env, home)))();
  if (npm) add("npm", [npm], "npm config get registry");
  const pip = pipIndexUrls(env, home, etc);
  if (pip) add("pip", pip.urls, pip.source);
  const apt = aptSourceUrls(etc);
  if (apt.urls.length) add("apt", apt.urls, apt.source);
  if (env.GOPROXY) add("go", env.GOPROXY.split(/[,|]/), "GOPROXY");
  return indexes;
}

/** Where each toolchain is told its index, for a hint that names what is missing. */
const INDEX_SETTING: Record<PackageIndex["tool"], string> = {
  npm: "`npm config set registry URL` or registry= in .npmrc",
  pip: "PIP_INDEX_URL, or index-url in pip.conf",
  apt: "the sources in /etc/apt/sources.list(.d)",
  go: "GOPROXY",
};

/** Which toolchain's download failed, from its output (its own error prefixes); null when the output does not say. */
function toolOf(output: string): PackageIndex["tool"] | null {
  if (/^npm (ERR!|error)|\bnpm (ERR!|error)\b/m.test(output)) return "npm";
  if (/\bpip\b|Looking in indexes|No matching distribution found|Could not find a version that satisfies/i.test(output)) return "pip";
  if (/^(Err|W|E):\d*\s|\bapt(-get)?\b/m.test(output)) return "apt";
  if (/^go: /m.test(output)) return "go";
  return null;
}

/**
 * The hint for a command that could not resolve a name in a sandbox whose
 * `sandbox.network.allow` is empty: that the list is empty, and the hosts of
 * `indexes` (from {@link packageIndexHosts}) to put in it, or where to find
 * them when the configuration names none. When the output shows which
 * toolchain failed (`tool`), only its index is named, or, when this
 * machine's configuration names none for it, where that toolchain is told one.
 */
function offlineHint(indexes: readonly PackageIndex[], tool: PackageIndex["tool"] | null): string {
  const relevant = tool ? indexes.filter((index) => index.tool === tool) : indexes;
  const named = relevant.map((index) => `${index.hosts.join(", ")} (${index.tool}: ${index.source})`);
  const none = tool
    ? `; this machine's ${tool} configuration names no index (${INDEX_SETTING[tool]}): allow your mirror's host, and point ${tool} at it in the task's setup`
    : "; this machine's npm, pip, apt and Go configuration name no index: use your mirror's host";
  return (
    "the sandbox has no network: sandbox.network.allow is empty, so no name resolves. To let it reach a package index, list its host under " +
    "sandbox.network.allow in the task file (--allow-host HOST for an ad-hoc task)" +
    (named.length ? `; this machine's configuration names ${named.join("; ")}` : none) +
    ' (docs/network.md "Package indexes")'
  );
}

/** Messages of resolvers that could not resolve a name: glibc (getaddrinfo), curl and git, Node (EAI_AGAIN, ENOTFOUND), apt, Go, Python. */
const NAME_RESOLUTION_FAILURE =
  /Temporary failure in name resolution|Could not resolve (host|proxy)?|getaddrinfo (EAI_AGAIN|ENOTFOUND)|\bEAI_AGAIN\b|Name or service not known|No address associated with hostname|nodename nor servname provided|dial tcp: lookup [^\s:]+.*no such host|Failed to resolve/i;

/** Whether `output` shows a name that could not be resolved. */
export function isNameResolutionFailure(output: string): boolean {
  return NAME_RESOLUTION_FAILURE.test(output);
}

function hostOf(url: string): string | null {
  const trimmed = url.trim();
  if (!trimmed || trimmed === "direct" || trimmed === "off") return null;
  try {
    const host = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed) ? trimmed : `https://${trimmed}`).hostname;
    return host || null;
  } catch {
    return null;
  }
}

function npmConfigRegistry(env: NodeJS.ProcessEnv, home: string): string | null {
  try {
    const registry = execFileSync("npm", ["config", "get", "registry"], {
      cwd: home,
      env,
      encoding: "utf8",
      timeout: 5000,
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
    return registry && registry !== "undefined" ? registry : null;
  } catch {
    return null;
  }
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

function pipIndexUrls(env: NodeJS.ProcessEnv, home: string, etc: string): { urls: string[]; source: string } | null {
  const fromEnv = [env.PIP_INDEX_URL, env.PIP_EXTRA_INDEX_URL].filter(Boolean).join(" ").split(/\s+/).filter(Boolean);
  if (fromEnv.length) return { urls: fromEnv, source: env.PIP_INDEX_URL ? "PIP_INDEX_URL" : "PIP_EXTRA_INDEX_URL" };
  const files = [
    env.PIP_CONFIG_FILE,
    join(env.XDG_CONFIG_HOME || join(home, ".config"), "pip", "pip.conf"),
    join(home, ".pip", "pip.conf"),
    join(etc, "pip.conf"),
  ].filter((path): path is string => Boolean(path));
  for (const file of files) {
    const text = readText(file);
    if (text === null) continue;
    // pip.conf is INI: `index-url = URL` and `extra-index-url = URL ...` (continuation lines indented).
    const urls: string[] = [];
    let inIndexKey = false;
    for (const line of text.split("\n")) {
      const key = /^\s*(index-url|extra-index-url|index_url|extra_index_url)\s*[=:]\s*(.*)$/i.exec(line);
      if (key) {
        urls.push(...key[2]!.split(/\s+/).filter(Boolean));
        inIndexKey = true;
      } else if (inIndexKey && /^\s+\S/.test(line)) urls.push(...line.trim().split(/\s+/));
      else inIndexKey = false;
    }
    if (urls.length) return { urls, source: file };
  }
  return null;
}

function aptSourceUrls(etc: string): { urls: string[]; source: string } {
  const directory = join(etc, "apt");
  let listed: string[] = [];
  try {
    listed = readdirSync(join(directory, "sources.list.d"))
      .filter((name) => name.endsWith(".list") || name.endsWith(".sources"))
      .sort()
      .map((name) => join(directory, "sources.list.d", name));
  } catch {
    listed = [];
  }
  const urls: string[] = [];
  const sources: string[] = [];
  for (const file of [join(directory, "sources.list"), ...listed]) {
    const text = readText(file);
    if (text === null) continue;
    const before = urls.length;
    for (const line of text.split("\n")) {
      // One-line style: `deb [options] URI suite components`; deb822 style: `URIs: URI ...`.
      const oneLine = /^\s*deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?(\S+)/.exec(line);
      const deb822 = /^URIs:\s*(.+)$/i.exec(line.trim());
      // Only network sources (a `file:` or `cdrom:` source needs no host).
      const found = oneLine ? [oneLine[1]!] : deb822 ? deb822[1]!.split(/\s+/) : [];
      urls.push(...found.filter((url) => /^(https?|ftp):\/\//i.test(url)));
    }
    if (urls.length > before) sources.push(file);
  }
  return { urls, source: sources.join(", ") };
}

/**
 * For a sandbox whose `sandbox.network.allow` is `allow`: a function that
 * gives the {@link offlineHint} for the output of a failed command that
 * could not resolve a name, and null for any other output, or always null
 * when the allow-list is not empty (then a name that does not resolve is not
 * the allow-list's doing). The indexes are looked up once, at the first need.
 */
export function offlineHintFor(allow: readonly unknown[], indexes: () => PackageIndex[] = () => packageIndexHosts()): (output: string) => string | null {
  if (allow.length) return () => null;
  let known: PackageIndex[] | null = null;
  return (output) => {
    if (!isNameResolutionFailure(output)) return null;
    known ??= indexes();
    return offlineHint(known, toolOf(output));
  };
}
