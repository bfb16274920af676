import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("CONTRIBUTING.md", () => {
  it("tells how to run npm run check and npm run format, and names only npm scripts and make targets that exist", () => {
    const text = readFileSync(join(ROOT, "CONTRIBUTING.md"), "utf8");
    const scripts = Object.keys((JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts);
    const named = [...new Set([...text.matchAll(/npm run ([\w:-]+)/g)].map((match) => match[1]!))];
    expect(named).toEqual(expect.arrayContaining(["check", "format"]));
    expect(named.filter((script) => !scripts.includes(script))).toEqual([]);
    const makefile = readFileSync(join(ROOT, "Makefile"), "utf8");
    // `make x` in text, or a line of a command block.
    const targets = [...new Set([...text.matchAll(/`make ([a-z-]+)`|^make ([a-z-]+)/gm)].map((match) => (match[1] ?? match[2])!))];
    expect(targets).toContain("check");
    expect(targets.filter((target) => !new RegExp(`^${target}:`, "m").test(makefile))).toEqual([]);
  });
});
