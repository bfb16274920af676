import { execFileSync } from "node:child_process";
import { beforeAll, describe, expect, it } from "vitest";
import { ShellParser } from "../../src/policy/shell-syntax.js";

let parser: ShellParser;
beforeAll(async () => {
  parser = await ShellParser.load();
});

/** What bash itself feeds `cat` from the script's first here-document, and the commands after it print. */
const bashOutput = (script: string): string => execFileSync("bash", ["-c", script], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });

describe("here-documents end where bash ends them", () => {
  // Each script feeds cat a body and then runs `echo after`: bash prints the body, then "after".
  const scripts: [string, string][] = [
    ["a Python enum member named like the delimiter", "cat <<'EOF'\nclass TokenType(enum.Enum):\n    EOF = \"end of input\"\nEOF\necho after"],
    ["a line starting with the delimiter", "cat <<EOF\nEOFX = 1\nEOF\necho after"],
    ["the delimiter with a trailing space", "cat <<EOF\nEOF \nEOF\necho after"],
    ["a double-quoted delimiter", 'cat <<"PY"\nPYTHON = 3\nPY\necho after'],
    ["a backslash-quoted delimiter", "cat <<\\END\nENDING\nEND\necho after"],
    ["<<- strips tabs, not spaces", "cat <<-EOF\n\tbody\n  EOF\n\tEOF\necho after"],
    ["two here-documents in a row", "cat <<'A'\nA1\nA\ncat <<'B'\n  B\nB\necho after"],
    ["a here-document inside a command substitution", "echo \"$(cat <<'EOF'\n  EOF\nEOF\n)\"\necho after"],
    ["a here-document piped on", "cat <<'EOF' | cat\nEOF;\nEOF\necho after"],
  ];

  it.each(scripts)("%s", (_label, script) => {
    const parsed = parser.parse(script);
    expect(parsed.errors).toEqual([]);
    const after = parsed.commands.at(-1);
    expect(after?.words.map((word) => (word.kind === "literal" ? word.value : word.text))).toEqual(["echo", "after"]);
    const output = bashOutput(script);
    const stdin = parsed.commands.find((command) => command.stdin)?.stdin;
    expect(stdin?.kind).toBe("literal");
    // The here-document inside $(...) loses its last newline to the substitution.
    if (stdin?.kind === "literal") expect(output.startsWith(stdin.value.replace(/\n$/, ""))).toBe(true);
    expect(output.endsWith("after\n")).toBe(true);
  });

  it("a body the input ends (bash warns and runs it) is parsed completely", () => {
    const parsed = parser.parse("python3 - <<'EOF'\nprint(1)\n");
    expect(parsed.errors).toEqual([]);
    expect(parsed.commands[0]?.stdin).toEqual({ kind: "literal", value: "print(1)\n", unquotedGlob: false });
  });

  it("commands after the real end line are seen, and the messages keep the user's delimiter", () => {
    const parsed = parser.parse("cat <<'EOF' > f.py && rm -rf /\n    EOF = 1\nEOF\ngit status");
    expect(parsed.errors).toEqual([]);
    expect(parsed.commands.map((command) => command.text)).toEqual(["cat", "rm -rf /", "git status"]);
    expect(parsed.writeRedirects.map((redirect) => redirect.text)).toEqual(["> f.py"]);
  });

  it("an unquoted body is still searched for substitutions", () => {
    const parsed = parser.parse("cat <<EOF\nEOFX $(rm -rf /)\nEOF");
    expect(parsed.errors).toEqual([]);
    expect(parsed.commands.map((command) => command.text)).toContain("rm -rf /");
  });

  it("two here-documents started on one line stay unparsed (tree-sitter-bash cannot read them): judged, then confirmed", () => {
    expect(parser.parse("cat <<A <<B\na\nA\nb\nB").errors).not.toEqual([]);
  });
});
