/**
 * Package index hosts from the user's own configuration (issue 26 items 7
 * and 12): npm's registry (real `npm config get registry`), pip's index-url,
 * apt's sources and GOPROXY; the offline hint that names them; and `runner
 * init`'s allow-list hint, which uses the same module and builds in no
 * public index. Every host here is an example.com one.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { initCommand } from "../../src/cli/init-command.js";
import { isNameResolutionFailure, offlineHintFor, packageIndexHosts } from "../../src/process/package-index-hosts.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

function write(path: string, text: string): void {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, text);
}

describe("packageIndexHosts", () => {
  it("reads npm's registry, pip's index-url (environment first), apt's sources in both styles and GOPROXY", async () => {
    await using home = temporaryDirectory();
    await using etc = temporaryDirectory();
    write(
      join(etc.path, "apt", "sources.list"),
      "# comment\ndeb [signed-by=/k.gpg] http://apt.example.com/debian bookworm main\ndeb-src http://apt.example.com/debian bookworm main\n",
    );
    write(
      join(etc.path, "apt", "sources.list.d", "security.sources"),
      "Types: deb\nURIs: https://security.example.com/debian-security\nSuites: bookworm-security\n",
    );
    write(join(etc.path, "apt", "sources.list.d", "local.list"), "deb file:/srv/repo ./\n");
    const env = {
      PATH: process.env.PATH,
      HOME: home.path,
      npm_config_registry: "https://npm.example.com/repository/npm/",
      PIP_INDEX_URL: "https://pip.example.com/simple",
      PIP_EXTRA_INDEX_URL: "https://extra.example.com/simple https://pip.example.com/other",
      GOPROXY: "https://goproxy.example.com|direct",
    };
    expect(packageIndexHosts({ env, home: home.path, etc: etc.path })).toEqual([
      { tool: "npm", hosts: ["npm.example.com"], source: "npm config get registry" },
      { tool: "pip", hosts: ["pip.example.com", "extra.example.com"], source: "PIP_INDEX_URL" },
      {
        tool: "apt",
        hosts: ["apt.example.com", "security.example.com"],
        source: `${join(etc.path, "apt", "sources.list")}, ${join(etc.path, "apt", "sources.list.d", "security.sources")}`,
      },
      { tool: "go", hosts: ["goproxy.example.com"], source: "GOPROXY" },
    ]);
  });

  it("pip.conf: the user's file, with an indented continuation of extra-index-url; nothing configured names nothing", async () => {
    await using home = temporaryDirectory();
    await using etc = temporaryDirectory();
    const conf = join(home.path, ".config", "pip", "pip.conf");
    write(
      conf,
      "[global]\nindex-url = https://mirror.example.com/pypi/simple\nextra-index-url =\n    https://a.example.org/simple\n    https://b.example.org/simple\ntimeout = 60\n",
    );
    const noNpm = () => null;
    expect(packageIndexHosts({ env: { HOME: home.path }, home: home.path, etc: etc.path, npmRegistry: noNpm })).toEqual([
      { tool: "pip", hosts: ["mirror.example.com", "a.example.org", "b.example.org"], source: conf },
    ]);
    await using empty = temporaryDirectory();
    expect(packageIndexHosts({ env: {}, home: empty.path, etc: etc.path, npmRegistry: noNpm })).toEqual([]);
  });
});

describe("the offline hint", () => {
  it("for a failed name resolution with an empty allow-list: says the list is empty and names the configured hosts; otherwise nothing", () => {
    const indexes = () => [{ tool: "npm" as const, hosts: ["npm.example.com"], source: "npm config get registry" }];
    const hint = offlineHintFor([], indexes);
    for (const output of [
      "npm error code EAI_AGAIN\nnpm error request to https://npm.example.com/left-pad failed, reason: getaddrinfo EAI_AGAIN npm.example.com",
      "WARNING: Retrying ... Failed to establish a new connection: [Errno -3] Temporary failure in name resolution",
      "curl: (6) Could not resolve host: files.example.com",
      "Err:1 http://apt.example.com/debian bookworm InRelease\n  Temporary failure resolving 'apt.example.com'\nCould not resolve 'apt.example.com'",
      'go: example.com/x@v1.0.0: Get "https://goproxy.example.com/...": dial tcp: lookup goproxy.example.com on 127.0.0.11:53: no such host',
    ])
      expect(isNameResolutionFailure(output), output).toBe(true);
    const text = hint("curl: (6) Could not resolve host: files.example.com");
    expect(text).toContain("sandbox.network.allow is empty");
    expect(text).toContain("npm.example.com (npm: npm config get registry)");
    expect(text).toContain("--allow-host HOST");
    // A failed pip names pip's index, not npm's; with none configured, where pip is told one.
    const pip = hint(
      "WARNING: Retrying ... /simple/requests/: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution\nERROR: No matching distribution found for requests",
    )!;
    expect(pip).not.toContain("npm.example.com");
    expect(pip).toContain("this machine's pip configuration names no index (PIP_INDEX_URL, or index-url in pip.conf)");
    expect(hint("npm error code EAI_AGAIN\nnpm error request to https://npm.example.com/x failed, reason: getaddrinfo EAI_AGAIN npm.example.com")).toContain(
      "npm.example.com (npm: npm config get registry)",
    );
    expect(hint("AssertionError: 1 != 2")).toBeNull();
    expect(offlineHintFor(["npm.example.com"], indexes)("getaddrinfo ENOTFOUND other.example.com")).toBeNull();
    expect(offlineHintFor([], () => [])("Could not resolve host: x.example.com")).toContain("name no index: use your mirror's host");
  });
});

describe("runner init's allow-list hint", () => {
  it("names the host of the index the test command's toolchain uses, from this machine's configuration; else a placeholder", async () => {
    await using npmProject = createGitRepository({ "package.json": '{"name":"app","scripts":{"test":"node -e 0"}}' });
    const sink = { write: () => true } as unknown as NodeJS.WritableStream;
    initCommand(npmProject.root, sink, () => [
      { tool: "pip", hosts: ["pip.example.com"], source: "PIP_INDEX_URL" },
      { tool: "npm", hosts: ["npm.example.com"], source: "npm config get registry" },
    ]);
    expect(readFileSync(join(npmProject.root, "task.yaml"), "utf8")).toMatch(
      /^ {4}# allow: \[npm\.example\.com\] {3}# npm's index, from npm config get registry, to install dependencies$/m,
    );
    await using pytestProject = createGitRepository({ "test_calc.py": "def test_x(): pass\n" });
    initCommand(pytestProject.root, sink, () => [{ tool: "npm", hosts: ["npm.example.com"], source: "npm config get registry" }]);
    expect(readFileSync(join(pytestProject.root, "task.yaml"), "utf8")).toMatch(
      /^ {4}# allow: \[registry\.example\.com\] {3}# your package index's host: this machine's pip configuration names none$/m,
    );
  });
});
