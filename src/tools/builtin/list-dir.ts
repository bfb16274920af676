import { z } from "zod";
import { defineTool, toolError } from "../define-tool.js";

const MAX_ENTRIES = 1000;

export const listDirTool = defineTool({
  name: "list_dir",
  readOnly: true,
  description: "List the entries of a directory in the workspace. Directories end with '/', symlinks with '@'.",
  input: z.strictObject({
    path: z.string().min(1).default(".").describe("Directory, relative to the workspace root or absolute inside it"),
  }),
  async execute(input, { sandbox }) {
    const entries = await sandbox.listDir(input.path);
    if (!entries) return toolError(`directory not found: ${input.path}`);
    if (entries.length === 0) return { content: `(${input.path} is empty)` };
    const names = entries
      .slice(0, MAX_ENTRIES)
      .map((entry) => (entry.type === "directory" ? `${entry.name}/` : entry.type === "symlink" ? `${entry.name}@` : entry.name));
    if (entries.length > MAX_ENTRIES) names.push(`[... ${entries.length - MAX_ENTRIES} more entries]`);
    return { content: names.join("\n"), details: { entries: entries.length } };
  },
});
