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

/** The unit a file of `src/` belongs to: `src/run/run-task.ts` → `run`; `src/errors.ts` → `errors.ts`; outside `src/` → null. */
export function unitOf(path: string): string | null {
  const parts = path.split("/");
  if (parts[0] !== "src" || parts.length < 2) return null;
  return parts[1]!;
}

/**
 * Every import in `<root>/src` from one unit to another (see {@link unitOf}),
 * read with `<root>/tsconfig.json`, sorted. Throws when dependency-cruiser
 * cannot read the sources (its message names the file).
 */
export async function readFolderImports(root: string): Promise<FolderImport[]> {
  const tsConfigFile = join(root, "tsconfig.json");
  const output = await cruise(
    ["src"],
    { baseDir: root, tsPreCompilationDeps: true, doNotFollow: { path: "node_modules" }, tsConfig: { fileName: tsConfigFile } },
    {},
    { tsConfig: existsSync(tsConfigFile) ? extractTSConfig(tsConfigFile) : undefined },
  );
  // Paths in the result are relative to baseDir.
  const result = output.output as ICruiseResult;
  return result.modules
    .flatMap((module) => module.dependencies.map((dependency) => ({ from: module.source, to: dependency.resolved })))
    .filter((edge) => {
      const from = unitOf(edge.from);
      const to = unitOf(edge.to);
      return from !== null && to !== null && from !== to;
    })
    .sort((a, b) => `${a.from} ${a.to}`.localeCompare(`${b.from} ${b.to}`));
}

/** The cycles among `imports` (as from {@link readFolderImports}): each strongly connected set of two or more units. */
export function folderCycles(imports: FolderImport[]): FolderCycle[] {
  const graph = new Graph({ directed: true });
  for (const edge of imports) graph.setEdge(unitOf(edge.from)!, unitOf(edge.to)!);
  return alg
    .tarjan(graph)
    .filter((component) => component.length > 1)
    .map((component) => {
      const members = new Set(component);
      return {
        folders: [...component].sort(),
        imports: imports.filter((edge) => members.has(unitOf(edge.from)!) && members.has(unitOf(edge.to)!)),
      };
    })
    .sort((a, b) => a.folders.join().localeCompare(b.folders.join()));
}

/** The folder-level cycles of `<root>/src`; throws as {@link readFolderImports} does. */
export async function findFolderCycles(root: string): Promise<FolderCycle[]> {
  return folderCycles(await readFolderImports(root));
}

/** The report printed by the command: one block per cycle. */
export function describeFolderCycles(cycles: FolderCycle[]): string {
  if (cycles.length === 0) return "no import cycles between folders of src/";
  const blocks = cycles.map((cycle) => `cycle between ${cycle.folders.join(", ")}:\n${cycle.imports.map((edge) => `  ${edge.from} → ${edge.to}`).join("\n")}`);
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
