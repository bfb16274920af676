/**
 * The package from a checkout, offline (issue 26 item 15): the built
 * checkout is packed as it would be published and installed into a fresh
 * project with `npm install --offline` (scripts/install-offline.mjs; every
 * dependency from the npm cache `npm ci` filled, none from a registry); the
 * project imports `createRunner` and runs `runner --version`. The package is
 * ready to publish: types, exports, engines, a prepublishOnly that builds and
 * checks, and only what `files` names.
 */

/**
 * A copy of the npm cache with only its package tarballs (what `npm ci` of
 * this checkout stored, content-addressed by integrity; contents hard-linked),
 * none of the registry documents other installs on the machine may have left:
 * an install that needs one fails with ENOTCACHED.
 */
function tarballOnlyCache(into: string): string {
  const source = join(process.env.npm_config_cache ?? join(homedir(), ".npm"), "_cacache");
  if (!existsSync(join(source, "index-v5"))) throw new Error(`no npm cache at ${source}: run npm ci first`);
  const cache = join(into, "_cacache");
  const copy = (from: string, keep: (file: string) => string | null) => {
    for (const entry of readdirSync(from, { withFileTypes: true, recursive: true })) {
      if (!entry.isFile()) continue;
      const file = join(entry.parentPath, entry.name);
      const target = join(cache, relative(source, file));
      const kept = keep(file);
      if (kept === null) continue;
      mkdirSync(dirname(target), { recursive: true });
      if (kept === "link") linkSync(file, target);
      else writeFileSync(target, kept);
    }
  };
  copy(join(source, "content-v2"), () => "link");
  copy(join(source, "index-v5"), (file) => {
    const lines = readFileSync(file, "utf8")
      .split("\n")
      .filter((line) =>
        /\/-\/[^"]*\.tgz"/.test(
          line
            .slice(line.indexOf("\t") + 1)
            .split('"key":')[1]
            ?.split(",")[0] ?? "",
        ),
      );
    return lines.length ? `${lines.join("\n")}\n` : null;
  });
  return into;
}
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { temporaryDirectory } from "../helpers/git-repository.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const ourPackage = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  version: string;
  engines: Record<string, string>;
  exports: Record<string, unknown>;
  scripts: Record<string, string>;
};

describe("agent-runner as an npm package from a checkout", () => {
  it("installs offline into a new project, which imports createRunner and runs runner --version", { timeout: 600_000 }, async () => {
    await using project = temporaryDirectory("agent-runner-package-");
    writeFileSync(join(project.path, "package.json"), JSON.stringify({ name: "uses-agent-runner", version: "1.0.0", private: true, type: "module" }));
    // npm must not reach a registry: an offline install that needed one fails with ENOTCACHED.
    // Asynchronously: the install takes minutes on a loaded machine, and a blocked worker misses vitest's heartbeats.
    await promisify(execFile)("node", [join(ROOT, "scripts/install-offline.mjs"), project.path], {
      cwd: project.path,
      encoding: "utf8",
      maxBuffer: 16 * 1024 * 1024,
      env: { ...process.env, npm_config_cache: tarballOnlyCache(join(project.path, ".npm")), npm_config_offline: "true", npm_config_update_notifier: "false" },
    });
    const tarball = readdirSync(project.path).find((name) => name.endsWith(".tgz"));
    expect(tarball).toBe(`agent-runner-${ourPackage.version}.tgz`);
    // The checkout is left as it was: the tarball went to the project.
    expect(readdirSync(ROOT).filter((name) => name.endsWith(".tgz"))).toEqual([]);

    const imported = execFileSync(
      "node",
      [
        "--input-type=module",
        "-e",
        'import { createRunner } from "agent-runner"; const r = await createRunner({ home: process.argv[1] }); console.log(typeof r.start, typeof r.continue); await r.close();',
        join(project.path, "home"),
      ],
      { cwd: project.path, encoding: "utf8" },
    );
    expect(imported.trim()).toBe("function function");
    const version = execFileSync(join(project.path, "node_modules/.bin/runner"), ["--version"], { cwd: project.path, encoding: "utf8" });
    expect(version.trim()).toBe(ourPackage.version);

    const files = execFileSync("tar", ["tzf", join(project.path, tarball!)], { encoding: "utf8" }).split("\n");
    expect(files).toEqual(expect.arrayContaining(["package/dist/index.js", "package/dist/index.d.ts", "package/dist/cli/main.js", "package/README.md"]));
    expect(files.filter((file) => file.startsWith("package/tests/") || file.startsWith("package/node_modules/"))).toEqual([]);
  });

  it("is ready to publish: types through exports, engines, a prepublishOnly that builds and checks", () => {
    expect(ourPackage.exports["."]).toEqual({ types: "./dist/index.d.ts", import: "./dist/index.js" });
    expect(ourPackage.engines.node).toBe(">=20");
    expect(ourPackage.scripts.prepublishOnly).toBe("npm run build && npm run check");
  });
});
