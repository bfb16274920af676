import type { ToolResult } from "../../src/tools/define-tool.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";

/**
 * `call(name, args)` through a ToolRegistry of the workspace tools, against
 * whatever sandbox `currentSandbox()` returns at call time (set in beforeAll).
 * `args` may be an object (sent as JSON) or a raw string.
 */
export function toolCaller(currentSandbox: () => Sandbox) {
  const registry = new ToolRegistry(workspaceTools());
  let counter = 0;
  return function call(name: string, args: unknown): Promise<ToolResult> {
    counter += 1;
    return registry.execute(name, typeof args === "string" ? args : JSON.stringify(args), {
      sandbox: currentSandbox(),
      signal: new AbortController().signal,
      toolCallId: `call-${counter}`,
      defaultTimeoutMs: 30_000,
    });
  };
}
