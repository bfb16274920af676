import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ShellParser } from "../../src/policy/shell-syntax.js";

/** Real agent commands (the file says where from): the shell judge must parse whatever bash parses. */
const corpus = JSON.parse(readFileSync(new URL("../fixtures/shell-corpus/agent-commands.json", import.meta.url), "utf8")) as {
  commands: { instance: string; command: string }[];
};

let parser: ShellParser;
let scratch: string;
let acceptedByBash: boolean[];

beforeAll(async () => {
  parser = await ShellParser.load();
  scratch = mkdtempSync(path.join(tmpdir(), "shell-corpus-"));
  const files = corpus.commands.map((entry, index) => {
    const file = path.join(scratch, `${index}.sh`);
    writeFileSync(file, entry.command);
    return file;
  });
  // One bash runs `bash -n` on every file: a process per command from Node would be slower on a shared machine.
  const verdicts = execFileSync("bash", ["-c", 'for file in "$@"; do if bash -n "$file" 2>/dev/null; then echo y; else echo n; fi; done', "bash", ...files], {
    encoding: "utf8",
  });
  acceptedByBash = verdicts
    .trim()
    .split("\n")
    .map((verdict) => verdict === "y");
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

describe("the shell judge parses every real agent command bash parses", () => {
  it("the corpus holds at least 500 commands, most of them valid bash", () => {
    expect(corpus.commands.length).toBeGreaterThanOrEqual(500);
    expect(acceptedByBash.filter(Boolean).length).toBeGreaterThanOrEqual(500);
  });

  it("no command bash -n accepts has a parse error", () => {
    const unparsed = corpus.commands
      .filter((_entry, index) => acceptedByBash[index])
      .map((entry) => ({ instance: entry.instance, errors: parser.parse(entry.command).errors, command: entry.command.slice(0, 200) }))
      .filter((result) => result.errors.length > 0);
    expect(unparsed).toEqual([]);
  });
});
