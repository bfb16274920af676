// tsc compiles .ts only; the scripts that run inside containers (the sandbox
// daemon, the egress proxy) ship as plain CommonJS next to their .js siblings.
import { chmodSync, cpSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";

function copyScripts(directory) {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) copyScripts(path);
    else if (entry.name.endsWith(".cjs")) cpSync(path, join("dist", relative("src", path)));
  }
}

copyScripts("src");
chmodSync("dist/cli/main.js", 0o755);
