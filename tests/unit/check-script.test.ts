/**
 * A scripted file's tool calls are checked against the runner's tools before
 * a run starts (issue 13: a typo must fail at load, not run and "succeed"):
 * names, and arguments against the same zod schemas the registry uses.
 */
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.js";
import type { Script } from "../../src/model/scripted-model-server.js";
import { checkScriptToolCalls, scriptToolCallProblems } from "../../src/runner/check-script.js";

describe("scriptToolCallProblems", () => {
  it("accepts every tool the runner defines, with fitting arguments", () => {
    const script: Script = {
      turns: [
        {
          tool_calls: [
            { name: "read_file", arguments: { path: "a.py" } },
            { name: "write_file", arguments: { path: "a.py", content: "x\n" } },
            { name: "edit_file", arguments: { path: "a.py", old_string: "x", new_string: "y" } },
            { name: "list_dir", arguments: {} },
            { name: "glob", arguments: { pattern: "**/*.py" } },
            { name: "grep", arguments: { pattern: "def" } },
            { name: "run_shell", arguments: { command: "ls" } },
            { name: "read_tool_result", arguments: { tool_call_id: "call_0_0" } },
            { name: "load_skill", arguments: { name: "tdd" } },
            { name: "agent", arguments: { mode: "worker", description: "fix it", prompt: "Fix it." } },
            { name: "task_list" },
            { name: "task_output", arguments: { task_id: "t1", offset: 2 } },
          ],
        },
        { content: "Done." },
      ],
    };
    expect(scriptToolCallProblems(script, [])).toEqual([]);
  });

  it("names the turn, the call, the field and the step (1-based) of each problem, in subagents' turns too", () => {
    const script: Script = {
      turns: [
        { tool_calls: [{ name: "read_file", arguments: { path: "a.py" } }] },
        { content: "thinking" },
        { tool_calls: [{ name: "list_dir" }] },
        {
          tool_calls: [
            { name: "read_file", arguments: { path: 5 } },
            { name: "delete_everything", arguments: {} },
          ],
        },
      ],
      subagents: { "fix shapes": { turns: [{ tool_calls: [{ name: "edit_file", arguments: { path: "s.py", old_string: "a", new_strng: "b" } }] }] } },
    };
    const problems = scriptToolCallProblems(script, []);
    expect(problems.map((problem) => problem.path)).toEqual([
      "turns[3].tool_calls[0].arguments.path (step 4, read_file)",
      "turns[3].tool_calls[1].name (step 4)",
      'subagents["fix shapes"].turns[0].tool_calls[0].arguments.new_string (step 1, edit_file)',
      'subagents["fix shapes"].turns[0].tool_calls[0].arguments (step 1, edit_file)',
    ]);
    expect(problems[0]!.message).toMatch(/expected string, received number/);
    expect(problems[1]!.message).toMatch(/^no tool "delete_everything"; the runner's tools are read_file, write_file, .*agent, task_list/);
    expect(problems[3]!.message).toMatch(/new_strng/);
  });

  it("never checks a call given as arguments_raw (how a script sends a bad call on purpose)", () => {
    const script: Script = {
      turns: [
        {
          tool_calls: [
            { name: "read_file", arguments_raw: "{not json" },
            { name: "delete_everything", arguments_raw: "{}" },
            { name: "read_file", arguments_raw: '{"path": 5}' },
          ],
        },
      ],
    };
    expect(scriptToolCallProblems(script, [])).toEqual([]);
  });

  it("MCP names: the server must be one of the task's mcp_servers; the tool part is the server's to know", () => {
    const script: Script = {
      turns: [
        { tool_calls: [{ name: "mcp__files__write_file", arguments: { anything: 1 } }, { name: "mcp__my_server__x" }, { name: "mcp__fils__read_text_file" }] },
      ],
    };
    const problems = scriptToolCallProblems(script, ["files", "my.server"]);
    expect(problems).toEqual([
      {
        path: "turns[0].tool_calls[2].name (step 1)",
        message: '"mcp__fils__read_text_file" names no server of the task\'s mcp_servers (it has "files", "my.server")',
      },
    ]);
    expect(scriptToolCallProblems({ turns: [{ tool_calls: [{ name: "mcp__files__x" }] }] }, [])[0]!.message).toMatch(/\(it has none\)$/);
  });

  it("checkScriptToolCalls throws one ConfigError (exit 2) naming the file and every problem", () => {
    const script: Script = {
      turns: [
        {
          tool_calls: [
            { name: "raed_file", arguments: { path: "a" } },
            { name: "run_shell", arguments: {} },
          ],
        },
      ],
    };
    let error: unknown;
    try {
      checkScriptToolCalls(script, "/t/script.yaml", []);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).exitCode).toBe(2);
    expect((error as Error).message).toMatch(
      /^model\.script \/t\/script\.yaml: 2 problem\(s\) in its tool calls \(a call that is wrong on purpose is given as arguments_raw/,
    );
    expect((error as Error).message).toContain('\n  - turns[0].tool_calls[0].name (step 1): no tool "raed_file"');
    expect((error as Error).message).toMatch(/\n {2}- turns\[0\]\.tool_calls\[1\]\.arguments\.command \(step 1, run_shell\): /);
  });
});
