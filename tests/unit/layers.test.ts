import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { readFolderImports, unitOf } from "../../scripts/check-folder-cycles.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The rank of each unit in docs/architecture.md's layer diagram, top (cli/) first:
 * folders as the first `name/` tokens of a line, the files directly in src/ last.
 */
function diagramRanks(): Map<string, number> {
  const text = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");
  const diagram = text.split("## Layers")[1]!.split("```")[1]!;
  const ranks = new Map<string, number>([["index.ts", 0]]);
  let rank = 1;
  for (const line of diagram.split("\n")) {
    const folders = /^[\s│├└─]*((?:[a-z-]+\/ ?)+)/.exec(line)?.[1];
    const files = line.includes("directly in src/") ? line.match(/[\w-]+\.ts\b/g) : null;
    const names = folders
      ? folders
          .trim()
          .split(/\s+/)
          .map((name) => name.slice(0, -1))
      : (files ?? []);
    if (names.length === 0) continue;
    for (const name of names) ranks.set(name, rank);
    rank += 1;
  }
  return ranks;
}

describe("docs/architecture.md's layer diagram", () => {
  it("names every folder of src/ and every file directly in it", () => {
    const units = readdirSync(join(ROOT, "src")).filter((name) => name !== "index.ts");
    expect(units.filter((unit) => !diagramRanks().has(unit))).toEqual([]);
  });

  it("is an order the imports keep: a folder imports only folders further down it", async () => {
    const ranks = diagramRanks();
    const upward = (await readFolderImports(ROOT)).filter((edge) => ranks.get(unitOf(edge.from)!)! > ranks.get(unitOf(edge.to)!)!);
    expect(upward).toEqual([]);
  });
});
