import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { z } from "zod";
import { defineTool, toolError, type Tool } from "../tools/define-tool.js";
import { pageLines } from "../tools/page-lines.js";

/**
 * Every tool result of one agent, so the model can read again what clearing
 * removed or what the per-result cap cut. Results longer than the cap are kept
 * whole in `<run>/tool-results/<agent>/<step>-<call id>.txt` (mode 0600); the
 * others are held in memory (they are also in session.jsonl).
 */
export class ToolResultStore {
  private readonly results = new Map<string, { content?: string; file?: string }>();

  constructor(
    private readonly runDirectory: string,
    private readonly agentId: string,
  ) {}

  /** Keeps a full output on disk (the caller redacts it first); returns its path relative to the run directory. */
  saveFull(step: number, callId: string, content: string): string {
    const directory = join(this.runDirectory, "tool-results", this.agentId.replace(/[^A-Za-z0-9_.-]/g, "_"));
    mkdirSync(directory, { recursive: true, mode: 0o700 });
    const file = join(directory, `${step}-${callId.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 100)}.txt`);
    writeFileSync(file, content, { mode: 0o600 });
    const relativePath = relative(this.runDirectory, file);
    this.results.set(callId, { file: relativePath });
    return relativePath;
  }

  /** Remembers a result the model got whole (or a full output saved earlier, by its relative path). */
  remember(callId: string, result: { content?: string; file?: string }): void {
    if (!this.results.get(callId)?.file || result.file) this.results.set(callId, result);
  }

  /** The full text of a result, or null when no call with that id finished. */
  read(callId: string): string | null {
    const result = this.results.get(callId);
    if (!result) return null;
    if (result.file) return readFileSync(join(this.runDirectory, result.file), "utf8");
    return result.content ?? null;
  }
}

/** Default lines per page of `read_tool_result`. */
const DEFAULT_PAGE_LINES = 500;

/** `read_tool_result`'s arguments (also what src/runner/check-script.ts checks a script's calls against). */
export const readToolResultInput = z.strictObject({
  tool_call_id: z.string().min(1).describe("The id of the tool call whose result to read"),
  offset: z.number().int().min(1).optional().describe("First line to read, 1-based (default 1)"),
  limit: z.number().int().min(1).optional().describe(`Lines to read (default ${DEFAULT_PAGE_LINES})`),
});

/**
 * `read_tool_result`: pages through a tool result kept by the runner (a
 * result cut to the per-result cap, or one cleared from the conversation).
 * Runs on the host, reading only the runner's own records: it never touches
 * the workspace.
 */
export function readToolResultTool(store: ToolResultStore, pageCharacters: number): Tool {
  return defineTool({
    name: "read_tool_result",
    readOnly: true,
    description:
      "Read an earlier tool result again, in pages of lines: one whose output was cut (it says so and names its tool_call_id) " +
      "or one cleared from the conversation to save context.",
    input: readToolResultInput,
    async execute(input) {
      const text = store.read(input.tool_call_id);
      if (text === null) return toolError(`no finished tool call with id "${input.tool_call_id}"`);
      const page = pageLines(text, input.offset ?? 1, input.limit ?? DEFAULT_PAGE_LINES, pageCharacters);
      if ("error" in page) return toolError(page.error);
      const more = page.last < page.total ? ` Continue with offset ${page.last + 1}.` : "";
      return { content: `[lines ${page.first}-${page.last} of ${page.total}.${more}]\n${page.text}` };
    },
  });
}
