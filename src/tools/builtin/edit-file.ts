import { z } from "zod";
import { defineTool, toolError } from "../define-tool.js";

export const editFileTool = defineTool({
  name: "edit_file",
  readOnly: false,
  description:
    "Replace an exact string in a file. old_string must match exactly once (including whitespace and indentation) " +
    "unless replace_all is true. Give enough surrounding lines to make it unique. The file is unchanged when the edit fails.",
  input: z.strictObject({
    path: z.string().min(1).describe("File path, relative to the workspace root or absolute inside it"),
    old_string: z.string().min(1).describe("Exact text to replace"),
    new_string: z.string().describe("Replacement text (inserted literally)"),
    replace_all: z.boolean().optional().describe("Replace every occurrence instead of requiring exactly one"),
  }),
  async execute(input, { sandbox }) {
    const file = await sandbox.readFile(input.path);
    if (!file) return toolError(`file not found: ${input.path}. Use write_file to create it.`);
    if (file.content.includes(0)) return toolError(`${input.path} is a binary file; edit_file edits text only`);
    let oldString = input.old_string;
    let newString = input.new_string;
    // Models write "\n"; a CRLF file keeps CRLF, whatever the strings hold.
    if (file.content.includes("\r\n")) {
      if (!oldString.includes("\r\n")) oldString = oldString.replace(/\n/g, "\r\n");
      newString = newString.replace(/\r?\n/g, "\r\n");
    }
    // Matching and splicing work on bytes, so bytes that are not valid UTF-8
    // elsewhere in the file survive the edit untouched.
    const search = Buffer.from(oldString, "utf8");
    const positions = occurrences(file.content, search);
    if (positions.length === 0) {
      return toolError(
        `old_string not found in ${input.path} (0 matches); the file is unchanged. Read the file again and copy the text exactly, including whitespace.`,
      );
    }
    const lines = positions.map((position) => lineOf(file.content, position));
    if (positions.length > 1 && !input.replace_all) {
      return toolError(
        `old_string matches ${positions.length} times in ${input.path} (lines ${lines.join(", ")}); the file is unchanged. ` +
          "Include more surrounding text to make it unique, or set replace_all: true.",
      );
    }
    const replacement = Buffer.from(newString, "utf8");
    const parts: Buffer[] = [];
    let cursor = 0;
    for (const position of positions) {
      parts.push(file.content.subarray(cursor, position), replacement);
      cursor = position + search.length;
    }
    parts.push(file.content.subarray(cursor));
    const written = await sandbox.writeFile(input.path, Buffer.concat(parts));
    const plural = positions.length === 1 ? "" : "s";
    return {
      content: `Edited ${input.path}: replaced ${positions.length} occurrence${plural} (line${plural} ${lines.join(", ")}).`,
      details: { path: written.path, replacements: positions.length },
    };
  },
});

function occurrences(content: Buffer, search: Buffer): number[] {
  const found: number[] = [];
  for (let index = content.indexOf(search); index !== -1; index = content.indexOf(search, index + search.length)) {
    found.push(index);
  }
  return found;
}

function lineOf(content: Buffer, position: number): number {
  let line = 1;
  for (let index = content.indexOf(10); index !== -1 && index < position; index = content.indexOf(10, index + 1)) line += 1;
  return line;
}
