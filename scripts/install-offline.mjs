#!/usr/bin/env node
/**
 * Installs agent-runner from this checkout into another npm project without
 * the network: `node scripts/install-offline.mjs <project-dir>` (docs/library.md
 * "Install from a checkout, offline").
 *
 * Why a script: `npm install --offline <tarball>` resolves the tarball's
 * dependency ranges, which needs each package's registry document (the
 * packument); `npm ci` of the checkout cached only the tarballs its lockfile
 * names (content-addressed by integrity), so npm answers ENOTCACHED, and npm
 * ignores a shrinkwrap inside a `file:` tarball. A lockfile that names every
 * package with its `resolved` URL and `integrity` needs no packument: so
 * this script packs the built checkout (`npm pack`, as published: the
 * package.json `files`) into the project, adds to the project's
 * package-lock.json the tarball and this checkout's production dependencies
 * from its own package-lock.json, all nested under
 * `node_modules/agent-runner/node_modules/` (so no version the project
 * already has is displaced), adds the dependency to its package.json, and
 * runs `npm install --offline` there. Every tarball then comes from the npm
 * cache that `npm ci` of this checkout filled.
 *
 * Exit 2 with the fix for a missing build, directory or package.json; npm's
 * own exit code when the install fails.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const checkout = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function fail(message) {
  process.stderr.write(`install-offline: ${message}\n`);
  process.exit(2);
}

const target = process.argv[2] ? resolve(process.argv[2]) : fail("usage: node scripts/install-offline.mjs <project-dir> (a directory with a package.json)");
if (!existsSync(join(target, "package.json"))) fail(`${target} has no package.json; create one there first (npm init -y)`);
if (!existsSync(join(checkout, "dist", "index.js")) || !existsSync(join(checkout, "dist", "cli", "main.js"))) {
  fail(`${checkout}/dist is missing: build the checkout first (npm ci && npm run build)`);
}

const ourPackage = JSON.parse(readFileSync(join(checkout, "package.json"), "utf8"));
const ourLock = JSON.parse(readFileSync(join(checkout, "package-lock.json"), "utf8"));

// The package as it would be published, without running the build again (prepack/prepublishOnly do that for a publish).
const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", target], { cwd: checkout, encoding: "utf8" }));
const tarball = basename(packed[0].filename);
const integrity = `sha512-${createHash("sha512")
  .update(readFileSync(join(target, tarball)))
  .digest("base64")}`;

const projectFile = join(target, "package.json");
const project = JSON.parse(readFileSync(projectFile, "utf8"));
project.dependencies = { ...project.dependencies, [ourPackage.name]: `file:${tarball}` };
writeFileSync(projectFile, `${JSON.stringify(project, null, 2)}\n`);

const lockFile = join(target, "package-lock.json");
const lock = existsSync(lockFile)
  ? JSON.parse(readFileSync(lockFile, "utf8"))
  : { name: project.name, version: project.version, lockfileVersion: 3, requires: true, packages: {} };
if (lock.lockfileVersion < 2) fail(`${lockFile} is a lockfile version ${lock.lockfileVersion}; update it with npm 7 or later first (npm install)`);
const { name, version, dependencies, optionalDependencies, devDependencies, peerDependencies } = project;
lock.packages[""] = { ...lock.packages[""], name, version, dependencies, optionalDependencies, devDependencies, peerDependencies };

const home = `node_modules/${ourPackage.name}`;
for (const key of Object.keys(lock.packages)) if (key === home || key.startsWith(`${home}/`)) delete lock.packages[key];
lock.packages[home] = {
  version: ourPackage.version,
  resolved: `file:${tarball}`,
  integrity,
  license: ourPackage.license,
  dependencies: ourPackage.dependencies,
  bin: ourPackage.bin,
  engines: ourPackage.engines,
};
// Our production tree, as npm ci installed it here, one level down. An entry without `resolved` (this
// checkout's lockfile records none) gets its tarball's address on the registry npm is configured with:
// npm then looks the tarball up in its cache by integrity and needs no registry document at all.
const registry = execFileSync("npm", ["config", "get", "registry"], { cwd: target, encoding: "utf8" }).trim().replace(/\/?$/, "/");
for (const [key, entry] of Object.entries(ourLock.packages)) {
  if (!key.startsWith("node_modules/") || entry.dev || entry.devOptional || entry.link) continue;
  const packageName = entry.name ?? key.slice(key.lastIndexOf("node_modules/") + "node_modules/".length);
  const resolved = entry.resolved ?? `${registry}${packageName}/-/${packageName.split("/").pop()}-${entry.version}.tgz`;
  lock.packages[`${home}/${key}`] = { ...entry, resolved };
}
writeFileSync(lockFile, `${JSON.stringify(lock, null, 2)}\n`);

const installed = spawnSync("npm", ["install", "--offline", "--no-audit", "--no-fund"], { cwd: target, stdio: "inherit" });
process.exit(installed.status ?? 1);
