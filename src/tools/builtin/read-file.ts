import { z } from "zod";
import { defineTool, toolError } from "../define-tool.js";

/** Lines returned when the model gives no `limit`. */
const DEFAULT_READ_LINES = 2000;
/** Longest line shown, in characters; the rest is cut with a marker. */
const MAX_LINE_CHARACTERS = 2000;
/** Bytes read from the sandbox at most; larger files must be paged with offset/limit within this. */
const MAX_READ_BYTES = 8 * 1024 * 1024;
/** Same test as git's: a NUL in the first 8000 bytes means binary. */
const BINARY_SNIFF_BYTES = 8000;

export const readFileTool = defineTool({
  name: "read_file",
  readOnly: true,
  description:
    "Read a text file in the workspace. Returns lines prefixed with their 1-based line numbers. " +
    `Use offset (first line, 1-based) and limit (number of lines, default ${DEFAULT_READ_LINES}) to page through long files. Binary files are refused.`,
  input: z.strictObject({
    path: z.string().min(1).describe("File path, relative to /workspace or absolute inside it"),
    offset: z.number().int().min(1).optional().describe("1-based line to start at"),
    limit: z.number().int().min(1).optional().describe("Maximum number of lines to return"),
  }),
  async execute(input, { sandbox }) {
    const file = await sandbox.readFile(input.path, { maxBytes: MAX_READ_BYTES });
    if (!file) return toolError(`file not found: ${input.path}`);
    if (file.content.subarray(0, BINARY_SNIFF_BYTES).includes(0)) {
      return toolError(`${input.path} is a binary file (${file.size} bytes); read_file shows text only. Use run_shell with \`xxd\` or \`file\` to inspect it.`);
    }
    const text = file.content.toString("utf8");
    if (text.length === 0) return { content: `(${input.path} is empty)` };
    const lines = text.split("\n");
    if (lines.at(-1) === "") lines.pop();
    const start = (input.offset ?? 1) - 1;
    if (start >= lines.length) {
      return toolError(`offset ${input.offset} is past the end of ${input.path} (${lines.length} lines)`);
    }
    const end = Math.min(lines.length, start + (input.limit ?? DEFAULT_READ_LINES));
    const width = String(end).length;
    const shown = lines.slice(start, end).map((line, index) => {
      const clipped = line.length > MAX_LINE_CHARACTERS ? `${line.slice(0, MAX_LINE_CHARACTERS)} [... line cut at ${MAX_LINE_CHARACTERS} characters]` : line;
      return `${String(start + index + 1).padStart(width, " ")}\t${clipped}`;
    });
    const notes: string[] = [];
    if (end < lines.length) notes.push(`[${lines.length - end} more lines; call read_file with offset=${end + 1} to continue]`);
    if (file.size > file.content.length) notes.push(`[file is ${file.size} bytes; only the first ${file.content.length} were read]`);
    return {
      content: [...shown, ...notes].join("\n"),
      details: { path: file.path, lines: end - start, size: file.size },
    };
  },
});
