import type { Tool } from "../define-tool.js";
import { editFileTool } from "./edit-file.js";
import { globTool } from "./glob.js";
import { grepTool } from "./grep.js";
import { listDirTool } from "./list-dir.js";
import { readFileTool } from "./read-file.js";
import { runShellTool } from "./run-shell.js";
import { writeFileTool } from "./write-file.js";

/** The workspace tools of DESIGN.md, in the stable order the model sees them. */
export function workspaceTools(): Tool[] {
  return [readFileTool, writeFileTool, editFileTool, listDirTool, globTool, grepTool, runShellTool] as Tool[];
}
