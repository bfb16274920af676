// tsc compiles .ts only; the script that runs inside a container (the egress
// proxy) ships as plain CommonJS next to its .js siblings, and the SWE-bench grader
// (run in verification sandboxes) as Python. The sandbox helper
// is a Go binary: scripts/build-helper.sh.
import { chmodSync, cpSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";

function copyScripts(directory) {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) copyScripts(path);
    else if (entry.name.endsWith(".cjs") || entry.name.endsWith(".py")) cpSync(path, join("dist", relative("src", path)));
  }
}

copyScripts("src");
// runner serve's page: ES modules and a stylesheet served as files (no bundler).
cpSync("src/server/assets", "dist/server/assets", { recursive: true });
chmodSync("dist/cli/main.js", 0o755);
