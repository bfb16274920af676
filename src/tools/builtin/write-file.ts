import { z } from "zod";
import { defineTool } from "../define-tool.js";

export const writeFileTool = defineTool({
  name: "write_file",
  readOnly: false,
  description:
    "Create or overwrite a file in the workspace with the given content. Parent directories are created. Prefer edit_file for changing part of an existing file.",
  input: z.strictObject({
    path: z.string().min(1).describe("File path, relative to the workspace root or absolute inside it"),
    content: z.string().describe("The complete new content of the file"),
  }),
  async execute(input, { sandbox }) {
    const written = await sandbox.writeFile(input.path, Buffer.from(input.content, "utf8"));
    return {
      content: `Wrote ${written.bytesWritten} bytes to ${input.path}`,
      // Lines as `wc -l` would count them, plus an unterminated last line.
      details: {
        path: written.path,
        bytes: written.bytesWritten,
        lines: input.content.split("\n").length - (input.content.endsWith("\n") || input.content === "" ? 1 : 0),
      },
    };
  },
});
