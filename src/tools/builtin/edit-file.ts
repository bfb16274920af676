import { z } from "zod";
import { defineTool, toolError } from "../define-tool.js";

export const editFileTool = defineTool({
  name: "edit_file",
  description:
    "Replace an exact string in a file. old_string must match exactly once (including whitespace and indentation) " +
    "unless replace_all is true. Give enough surrounding lines to make it unique. The file is unchanged when the edit fails.",
  input: z.strictObject({
    path: z.string().min(1).describe("File path, relative to /workspace or absolute inside it"),
    old_string: z.string().min(1).describe("Exact text to replace"),
    new_string: z.string().describe("Replacement text (inserted literally)"),
    replace_all: z.boolean().optional().describe("Replace every occurrence instead of requiring exactly one"),
  }),
  async execute(input, { sandbox }) {
    const file = await sandbox.readFile(input.path);
    if (!file) return toolError(`file not found: ${input.path}. Use write_file to create it.`);
    if (file.content.includes(0)) return toolError(`${input.path} is a binary file; edit_file edits text only`);
    const text = file.content.toString("utf8");
    let oldString = input.old_string;
    let newString = input.new_string;
    // Models write "\n"; a CRLF file keeps CRLF.
    if (text.includes("\r\n") && !oldString.includes("\r\n") && oldString.includes("\n")) {
      oldString = oldString.replace(/\n/g, "\r\n");
      newString = newString.replace(/\r?\n/g, "\r\n");
    }
    const positions = occurrences(text, oldString);
    if (positions.length === 0) {
      return toolError(`old_string not found in ${input.path} (0 matches); the file is unchanged. Read the file again and copy the text exactly, including whitespace.`);
    }
    if (positions.length > 1 && !input.replace_all) {
      const lines = positions.map((position) => lineOf(text, position));
      return toolError(
        `old_string matches ${positions.length} times in ${input.path} (lines ${lines.join(", ")}); the file is unchanged. ` +
          "Include more surrounding text to make it unique, or set replace_all: true.",
      );
    }
    // split/join, not String.replace: `$&`, `$1` and friends stay literal.
    const updated = text.split(oldString).join(newString);
    const written = await sandbox.writeFile(input.path, Buffer.from(updated, "utf8"));
    return {
      content: `Edited ${input.path}: replaced ${positions.length} occurrence${positions.length === 1 ? "" : "s"} (line${positions.length === 1 ? "" : "s"} ${positions.map((position) => lineOf(text, position)).join(", ")}).`,
      details: { path: written.path, replacements: positions.length },
    };
  },
});

function occurrences(text: string, search: string): number[] {
  const found: number[] = [];
  for (let index = text.indexOf(search); index !== -1; index = text.indexOf(search, index + search.length)) {
    found.push(index);
  }
  return found;
}

function lineOf(text: string, position: number): number {
  let line = 1;
  for (let index = 0; index < position; index += 1) if (text.charCodeAt(index) === 10) line += 1;
  return line;
}
