// read_file / write_file / edit_file semantics, run through ToolRegistry against a
// real DockerSandbox. File contents are checked as bytes on the host side of the
// bind mount, so nothing here trusts the tools to report on themselves.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { toolCaller } from "../helpers/tool-caller.js";
import { createSandboxWorkspace, createTestSandbox, requireDocker } from "../helpers/docker.js";

const TWENTY_FIVE_LINES = Array.from({ length: 25 }, (_, index) => `line ${index + 1}`).join("\n") + "\n";
const LATIN1_CAFE = Buffer.concat([Buffer.from("name = 'caf"), Buffer.from([0xe9]), Buffer.from("'\nprice = 1\n")]);

const INITIAL_FILES: Record<string, string | Buffer> = {
  "edit/zero.txt": "alpha\nbeta\n",
  "edit/multi.txt": "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n",
  "edit/all.txt": "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n",
  "edit/crlf.txt": "line one\r\nline two\r\nline three\r\n",
  "edit/crlf-grow.txt": "line one\r\nline two\r\nline three\r\n",
  "edit/dollar.txt": "const price = PLACEHOLDER;\n",
  "edit/dollar-all.txt": "a = PLACEHOLDER\nb = PLACEHOLDER\n",
  "edit/latin1.py": LATIN1_CAFE,
  "read/lines.txt": TWENTY_FIVE_LINES,
  "read/binary.bin": Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52]),
  "read/invalid-utf8.txt": Buffer.from([0x61, 0xff, 0xfe, 0x62, 0x0a, 0x63, 0x0a]),
};

let workspace: ReturnType<typeof createSandboxWorkspace>;
let sandbox: Sandbox;
const call = toolCaller(() => sandbox);

function hostBytes(path: string): Buffer {
  return readFileSync(join(workspace.path, path));
}

beforeAll(async () => {
  await requireDocker();
  workspace = createSandboxWorkspace(INITIAL_FILES);
  sandbox = await createTestSandbox(workspace.path);
});

afterAll(async () => {
  await sandbox?.close();
  await workspace?.[Symbol.asyncDispose]();
});

describe("edit_file", () => {
  it("with 0 matches returns an Error naming the count and leaves the file byte-identical", async () => {
    const before = hostBytes("edit/zero.txt");
    const result = await call("edit_file", { path: "edit/zero.txt", old_string: "gamma", new_string: "delta" });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/^Error: /);
    expect(result.content).toMatch(/\b0 matches\b/);
    expect(result.content).toContain("edit/zero.txt");
    expect(hostBytes("edit/zero.txt").equals(before)).toBe(true);
  });

  it("with >1 matches and no replace_all returns an Error naming the count and the lines, file unchanged", async () => {
    const before = hostBytes("edit/multi.txt");
    const result = await call("edit_file", { path: "edit/multi.txt", old_string: "x = 1", new_string: "x = 2" });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/^Error: /);
    expect(result.content).toMatch(/\b3 times\b|\b3 matches\b/);
    expect(result.content).toMatch(/lines 1, 3, 5\b/);
    expect(hostBytes("edit/multi.txt").equals(before)).toBe(true);

    // replace_all: false is the same as leaving it out.
    const explicit = await call("edit_file", { path: "edit/multi.txt", old_string: "x = 1", new_string: "x = 2", replace_all: false });
    expect(explicit.content).toMatch(/^Error: .*\b3\b/);
    expect(hostBytes("edit/multi.txt").equals(before)).toBe(true);
  });

  it("replace_all replaces every occurrence and nothing else", async () => {
    const result = await call("edit_file", { path: "edit/all.txt", old_string: "x = 1", new_string: "x = 10", replace_all: true });
    expect(result.isError).toBeFalsy();
    expect(result.content).toMatch(/\b3 occurrences\b/);
    expect(hostBytes("edit/all.txt").toString("utf8")).toBe("x = 10\ny = 2\nx = 10\nz = 3\nx = 10\n");
  });

  it("a unique match is replaced exactly once", async () => {
    const result = await call("edit_file", { path: "edit/zero.txt", old_string: "beta\n", new_string: "beta\ngamma\n" });
    expect(result.isError).toBeFalsy();
    expect(hostBytes("edit/zero.txt").toString("utf8")).toBe("alpha\nbeta\ngamma\n");
  });

  it("keeps CRLF line endings when old_string and new_string use \\n", async () => {
    const result = await call("edit_file", {
      path: "edit/crlf.txt",
      old_string: "line one\nline two",
      new_string: "first\nsecond\nsecond and a half",
    });
    expect(result.isError).toBeFalsy();
    const after = hostBytes("edit/crlf.txt").toString("latin1");
    expect(after).toBe("first\r\nsecond\r\nsecond and a half\r\nline three\r\n");
    expect(after).not.toMatch(/(?<!\r)\n/);
  });

  it("keeps CRLF line endings when only new_string contains \\n (old_string is a single line)", async () => {
    const result = await call("edit_file", { path: "edit/crlf-grow.txt", old_string: "line three", new_string: "third\nfourth" });
    expect(result.isError).toBeFalsy();
    const after = hostBytes("edit/crlf-grow.txt").toString("latin1");
    // Every line break in the file must still be CRLF: no bare LF may appear.
    expect(after).not.toMatch(/(?<!\r)\n/);
    expect(after).toBe("line one\r\nline two\r\nthird\r\nfourth\r\n");
  });

  it("inserts $&, $1, $$, $' and $` in new_string literally", async () => {
    const replacement = "$& $1 $$ $' $` $<name>";
    const result = await call("edit_file", { path: "edit/dollar.txt", old_string: "PLACEHOLDER", new_string: replacement });
    expect(result.isError).toBeFalsy();
    expect(hostBytes("edit/dollar.txt").toString("utf8")).toBe(`const price = ${replacement};\n`);

    const all = await call("edit_file", { path: "edit/dollar-all.txt", old_string: "PLACEHOLDER", new_string: "$$1 $&", replace_all: true });
    expect(all.isError).toBeFalsy();
    expect(hostBytes("edit/dollar-all.txt").toString("utf8")).toBe("a = $$1 $&\nb = $$1 $&\n");
  });

  it("on a file that is not valid UTF-8 never rewrites bytes outside the edited text", async () => {
    const before = hostBytes("edit/latin1.py");
    const result = await call("edit_file", { path: "edit/latin1.py", old_string: "price = 1", new_string: "price = 2" });
    const after = hostBytes("edit/latin1.py");
    if (result.isError) {
      // Refusing is fine, as long as nothing changed.
      expect(after.equals(before)).toBe(true);
    } else {
      // Editing is fine, as long as the 0xE9 byte elsewhere in the file survives.
      const expected = Buffer.concat([Buffer.from("name = 'caf"), Buffer.from([0xe9]), Buffer.from("'\nprice = 2\n")]);
      expect(after.toString("hex")).toBe(expected.toString("hex"));
    }
  });

  it("on a missing file returns an Error and creates nothing", async () => {
    const result = await call("edit_file", { path: "edit/missing.txt", old_string: "a", new_string: "b" });
    expect(result.content).toMatch(/^Error: .*not found.*edit\/missing\.txt/);
    expect(() => hostBytes("edit/missing.txt")).toThrow(/ENOENT/);
  });
});

describe("write_file", () => {
  it("creates parent directories and reports the UTF-8 byte count", async () => {
    const content = "héllo wörld\n";
    const result = await call("write_file", { path: "written/deep/nested/file.txt", content });
    expect(result.isError).toBeFalsy();
    expect(result.content).toContain(`${Buffer.byteLength(content)} bytes`);
    expect(hostBytes("written/deep/nested/file.txt").toString("utf8")).toBe(content);
  });
});

describe("read_file", () => {
  it("numbers lines, pages with offset/limit and notes how many lines are left", async () => {
    const whole = await call("read_file", { path: "read/lines.txt" });
    expect(whole.isError).toBeFalsy();
    const wholeRows = whole.content.split("\n");
    expect(wholeRows).toHaveLength(25);
    expect(wholeRows[0]).toMatch(/^\s*1\tline 1$/);
    expect(wholeRows[24]).toMatch(/^\s*25\tline 25$/);
    expect(whole.content).not.toMatch(/more lines/);

    const page = await call("read_file", { path: "read/lines.txt", offset: 10, limit: 5 });
    expect(page.isError).toBeFalsy();
    const pageRows = page.content.split("\n");
    expect(pageRows.slice(0, 5).map((row) => row.trim())).toEqual(["10\tline 10", "11\tline 11", "12\tline 12", "13\tline 13", "14\tline 14"]);
    expect(pageRows).toHaveLength(6);
    expect(pageRows[5]).toMatch(/\b11 more lines\b/);
    expect(pageRows[5]).toMatch(/offset=15\b/);

    const last = await call("read_file", { path: "read/lines.txt", offset: 21, limit: 10 });
    expect(last.content.split("\n").map((row) => row.trim())).toEqual(["21\tline 21", "22\tline 22", "23\tline 23", "24\tline 24", "25\tline 25"]);

    const past = await call("read_file", { path: "read/lines.txt", offset: 26 });
    expect(past.content).toMatch(/^Error: .*offset 26.*25 lines/);
  });

  it("refuses a binary file (NUL bytes) with a clear Error", async () => {
    const result = await call("read_file", { path: "read/binary.bin" });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/^Error: .*read\/binary\.bin.*binary/);
    expect(result.content).not.toContain("\u0000");
  });

  it("returns invalid UTF-8 bytes as U+FFFD and keeps the rest of the text", async () => {
    const result = await call("read_file", { path: "read/invalid-utf8.txt" });
    expect(result.isError).toBeFalsy();
    const rows = result.content.split("\n").map((row) => row.trim());
    expect(rows[0]).toBe("1\ta\uFFFD\uFFFDb");
    expect(rows[1]).toBe("2\tc");
    // The sandbox still answers afterwards.
    expect((await call("read_file", { path: "read/lines.txt", limit: 1 })).content).toMatch(/^\s*1\tline 1\n/);
  });

  it("run_shell output with invalid UTF-8 comes back with U+FFFD", async () => {
    const result = await call("run_shell", { command: "printf 'ok\\xff\\xfeend\\n'; printf '\\xff' >&2" });
    expect(result.isError).toBeFalsy();
    expect(result.content).toMatch(/^exit_code: 0\n/);
    expect(result.content).toContain("ok\uFFFD\uFFFDend");
    expect(result.content).toMatch(/stderr:\n\uFFFD$/);
  });

  it("a directory or a missing file is an Error, not an exception", async () => {
    const directory = await call("read_file", { path: "read" });
    expect(directory.content).toMatch(/^Error: .*read.*not a regular file|^Error: .*directory/);
    const missing = await call("read_file", { path: "read/nope.txt" });
    expect(missing.content).toMatch(/^Error: file not found: read\/nope\.txt/);
  });
});
