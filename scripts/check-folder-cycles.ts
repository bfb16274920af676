/**
 * The layering check of `npm run check`: no import cycle between the folders
 * of `src/` (a folder is `src/<dir>`; each file directly in `src/` is a unit
 * of its own). Type-only imports count: they couple layers as much as values.
 *
 * dependency-cruiser reads the import graph (TypeScript resolution, `.js`
 * specifiers to `.ts` files, type-only imports); @dagrejs/graphlib finds the
 * strongly connected components. Its own `scope: "folder"` rule is not used
 * because it works on every directory depth and names an import's target by
 * its exact directory: `src/a/x.ts → src/b/y.ts → src/a/sub/z.ts` is a cycle
 * between `src/a` and `src/b`, and that rule does not see it.
 *
 * Usage: `tsx scripts/check-folder-cycles.ts [root]` (root defaults to the
 * repository); prints each cycle with the imports that make it, exit 1 if any.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { alg, Graph } from "@dagrejs/graphlib";
import { cruise, type ICruiseResult } from "dependency-cruiser";
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config";

/** One import between two different folders: repository-relative file paths. */
export interface FolderImport {
  from: string;
  to: string;
}

/** Folders (sorted) that import each other round, with every import between two of them. */
export interface FolderCycle {
  folders: string[];
  imports: FolderImport[];
}

/** `src/run/run-task.ts` → `run`; `src/errors.ts` → `errors.ts`; outside `src/` → null. */
function unitOf(path: string): string | null {
  const parts = path.split("/");
  if (parts[0] !== "src" || parts.length < 2) return null;
  return parts[1]!;
}

/**
 * The folder-level cycles of `<root>/src`, read with `<root>/tsconfig.json`.
 * Throws when dependency-cruiser cannot read the sources (its message names the file).
 */
export async function findFolderCycles(root: string): Promise<FolderCycle[]> {
  const tsConfigFile = join(root, "tsconfig.json");
  const output = await cruise(
    ["src"],
    { baseDir: root, tsPreCompilationDeps: true, doNotFollow: { path: "node_modules" }, tsConfig: { fileName: tsConfigFile } },
    {},
    { tsConfig: existsSync(tsConfigFile) ? extractTSConfig(tsConfigFile) : undefined },
  );
  // Paths in the result are relative to baseDir.
  const result = output.output as ICruiseResult;

  const graph = new Graph({ directed: true });
  const imports = new Map<string, FolderImport[]>();
  for (const module of result.modules) {
    const from = unitOf(module.source);
    if (from === null) continue;
    graph.setNode(from);
    for (const dependency of module.dependencies) {
      const to = unitOf(dependency.resolved);
      if (to === null || to === from) continue;
      graph.setEdge(from, to);
      const key = `${from}\0${to}`;
      imports.set(key, [...(imports.get(key) ?? []), { from: module.source, to: dependency.resolved }]);
    }
  }

  return alg
    .tarjan(graph)
    .filter((component) => component.length > 1)
    .map((component) => {
      const folders = [...component].sort();
      const members = new Set(folders);
      const between = [...imports.entries()]
        .filter(([key]) => {
          const [from, to] = key.split("\0") as [string, string];
          return members.has(from) && members.has(to);
        })
        .flatMap(([, list]) => list)
        .sort((a, b) => `${a.from} ${a.to}`.localeCompare(`${b.from} ${b.to}`));
      return { folders, imports: between };
    })
    .sort((a, b) => a.folders.join().localeCompare(b.folders.join()));
}

/** The report printed by the command: one block per cycle. */
export function describeFolderCycles(cycles: FolderCycle[]): string {
  if (cycles.length === 0) return "no import cycles between folders of src/";
  const blocks = cycles.map(
    (cycle) => `cycle between ${cycle.folders.join(", ")}:\n${cycle.imports.map((edge) => `  ${edge.from} → ${edge.to}`).join("\n")}`,
  );
  return `${cycles.length} import cycle${cycles.length > 1 ? "s" : ""} between folders of src/ (move the type or function to the lower layer; docs/architecture.md):\n${blocks.join("\n")}`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(process.argv[2] ?? fileURLToPath(new URL("..", import.meta.url)));
  const cycles = await findFolderCycles(root);
  const report = describeFolderCycles(cycles);
  if (cycles.length) {
    console.error(report);
    process.exitCode = 1;
  } else {
    console.log(report);
  }
}
