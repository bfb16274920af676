import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { describeFolderCycles, findFolderCycles } from "../../scripts/check-folder-cycles.ts";

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A tiny NodeNext project: `files` maps paths under the root to their source. */
function project(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "folder-cycles-"));
  roots.push(root);
  const tsconfig = { compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", strict: true, rootDir: "src" }, include: ["src/**/*.ts"] };
  writeFileSync(join(root, "tsconfig.json"), JSON.stringify(tsconfig));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe("the folder-level import cycle check (npm run check)", () => {
  it("finds a cycle that runs through a sub-folder and a type-only import, and names the imports", async () => {
    const root = project({
      "src/sandbox/sandbox.ts": 'import type { AllowRule } from "../config/allow.js";\nexport type Spec = { allow: AllowRule[] };\n',
      "src/config/allow.ts": 'import { hooks } from "../hooks/hooks.js";\nexport type AllowRule = string;\nexport const all = hooks;\n',
      "src/hooks/hooks.ts": 'import { tool } from "../tools/builtin/tool.js";\nexport const hooks = [tool];\n',
      "src/tools/builtin/tool.ts": 'import type { Spec } from "../../sandbox/sandbox.js";\nexport const tool = (spec: Spec) => spec;\n',
      "src/errors.ts": "export class RunnerError extends Error {}\n",
      "src/workspace/git.ts": 'import { RunnerError } from "../errors.js";\nexport const fail = () => new RunnerError();\n',
    });
    const cycles = await findFolderCycles(root);
    expect(cycles.map((cycle) => cycle.folders)).toEqual([["config", "hooks", "sandbox", "tools"]]);
    expect(cycles[0]!.imports).toContainEqual({ from: "src/tools/builtin/tool.ts", to: "src/sandbox/sandbox.ts" });
    expect(cycles[0]!.imports).toContainEqual({ from: "src/sandbox/sandbox.ts", to: "src/config/allow.ts" });
    expect(describeFolderCycles(cycles)).toMatch(/1 import cycle between folders of src\/.*\ncycle between config, hooks, sandbox, tools:/);
  });

  it("finds a cycle whose way back lands in a sub-folder that never imports its parent", async () => {
    const root = project({
      "src/a/x.ts": 'import { y } from "../b/y.js";\nexport const x = y;\n',
      "src/b/y.ts": 'import { z } from "../a/sub/z.js";\nexport const y = z;\n',
      "src/a/sub/z.ts": "export const z = 1;\n",
    });
    expect((await findFolderCycles(root)).map((cycle) => cycle.folders)).toEqual([["a", "b"]]);
  });

  it("passes layers that only point down, and imports inside one folder", async () => {
    const root = project({
      "src/run/run.ts": 'import { open } from "../sandbox/sandbox.js";\nimport { helper } from "./helper.js";\nexport const run = () => [open(), helper()];\n',
      "src/run/helper.ts": 'import { run } from "./run.js";\nexport const helper = () => typeof run;\n',
      "src/sandbox/sandbox.ts": 'import { RunnerError } from "../errors.js";\nexport const open = () => RunnerError;\n',
      "src/errors.ts": "export class RunnerError extends Error {}\n",
      "src/index.ts": 'export { run } from "./run/run.js";\n',
    });
    const cycles = await findFolderCycles(root);
    expect(cycles).toEqual([]);
    expect(describeFolderCycles(cycles)).toBe("no import cycles between folders of src/");
  });
});
