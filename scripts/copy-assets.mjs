// tsc compiles .ts only; the in-container daemon ships as plain JavaScript.
import { chmodSync, cpSync } from "node:fs";
cpSync("src/sandbox/docker/daemon", "dist/sandbox/docker/daemon", { recursive: true });
chmodSync("dist/cli/main.js", 0o755);
