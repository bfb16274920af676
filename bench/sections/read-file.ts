/**
 * Section 3: read_file of a 100 KB and a 1 MB text file, through the tool and
 * raw (DockerSandbox.readFile: the daemon reads, base64s into one JSON line,
 * the host parses and decodes), against the host reading the same file.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { interleave, type Row } from "../lib/stats.js";
import { toolContext } from "./round-trip.js";

export const READ_FILES = { "text-100k.txt": 100 * 1024, "text-1m.txt": 1024 * 1024 } as const;

export async function benchReadFile(sandbox: Sandbox, workspace: string, rounds: number): Promise<Row[]> {
  const registry = new ToolRegistry(workspaceTools());
  const context = toolContext(sandbox);
  const variants: Record<string, () => Promise<unknown>> = {};
  for (const [file, size] of Object.entries(READ_FILES)) {
    variants[`tool ${file}`] = async () => {
      const result = await registry.execute("read_file", JSON.stringify({ path: file }), context);
      if (result.isError) throw new Error(`read_file ${file}: ${result.content}`);
    };
    variants[`raw ${file}`] = async () => {
      const content = await sandbox.readFile(file, { maxBytes: 8 * 1024 * 1024 });
      if (content?.content.length !== size) throw new Error(`readFile ${file}: got ${content?.content.length} bytes`);
    };
    variants[`host ${file}`] = () => readFile(join(workspace, file));
  }
  // What read_file shows of the 1 MB file is its first 2000 lines (~160 KB): a
  // read capped there bounds what a line-range read op in the daemon could save.
  variants["raw 1m capped"] = async () => {
    const content = await sandbox.readFile("text-1m.txt", { maxBytes: 2000 * 80 });
    if (content?.content.length !== 2000 * 80) throw new Error("capped readFile: wrong size");
  };
  const samples = await interleave(variants, rounds, 3);
  return [
    { name: "host fs.readFile 100 KB", samples: samples["host text-100k.txt"]! },
    { name: "sandbox.readFile 100 KB (raw)", samples: samples["raw text-100k.txt"]!, baseline: "host fs.readFile 100 KB" },
    {
      name: "read_file 100 KB via ToolRegistry",
      samples: samples["tool text-100k.txt"]!,
      baseline: "sandbox.readFile 100 KB (raw)",
      note: "1280 lines, all returned with line numbers",
    },
    { name: "host fs.readFile 1 MB", samples: samples["host text-1m.txt"]! },
    { name: "sandbox.readFile 1 MB (raw)", samples: samples["raw text-1m.txt"]!, baseline: "host fs.readFile 1 MB" },
    {
      name: "read_file 1 MB via ToolRegistry",
      samples: samples["tool text-1m.txt"]!,
      baseline: "sandbox.readFile 1 MB (raw)",
      note: "whole 1 MB (13 108 lines) transferred; the first 2000 lines shown",
    },
    {
      name: "alt: sandbox.readFile 1 MB, maxBytes 160 KB",
      samples: samples["raw 1m capped"]!,
      baseline: "read_file 1 MB via ToolRegistry",
      note: "only the 2000 lines read_file shows: what a daemon-side line-range read would move",
    },
  ];
}
