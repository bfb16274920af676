import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

  // Where bash's end is not the plain rule, nothing is rewritten: a command bash runs is never taken for a body.
  it.each([
    ["the delimiter followed by ) inside $( )", "echo $(cat <<EOF\nEOF)\ntouch ran\nEOF\n)"],
    ["the delimiter followed by ) inside backticks", "x=`cat <<EOF\nEOF`\ntouch ran\nEOF\n`"],
    ["a delimiter word ending in a carriage return", "cat <<EOF\r\nEOF\r\ntouch ran\nEOF"],
    ["two here-documents on one line", "cat <<A; cat <<B\nA\nB\ntouch ran\nB"],
    ["a here-document after one that ends early", "cat <<EOF\nEOFX\nEOF\ncat <<X\n  X\nX\ntouch ran"],
    ["the delimiter line after a line starting with it", "cat <<EOF\nEOF = 1\nEOF\ntouch ran"],
  ])("%s: a command bash runs is seen", (_label, script) => {
    const directory = mkdtempSync(join(tmpdir(), "here-documents-"));
    try {
      try {
        execFileSync("bash", ["-c", script], { cwd: directory, stdio: "ignore" });
      } catch {
        // A script bash ends with an error may still have run the command.
      }
      const parsed = parser.parse(script);
      const seen = parsed.commands.some((command) => command.words[0]?.kind === "literal" && command.words[0].value === "touch");
      expect(existsSync(join(directory, "ran"))).toBe(true);
      expect(seen, JSON.stringify(parsed.commands.map((command) => command.text))).toBe(true);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
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
