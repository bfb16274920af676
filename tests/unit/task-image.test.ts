import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadTaskFile, TaskValidationError } from "../../src/config/load-task.js";
import { buildInputs } from "../../src/sandbox/task-image.js";
import { workdirProblem } from "../../src/sandbox/workdir.js";
import { PermissionChecker } from "../../src/policy/permission-checker.js";
import { loadPolicy } from "../../src/policy/load-policy.js";
import { workspaceAgentSystemPrompt } from "../../src/agent/system-prompt.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

function problemsOf(file: string): { path: string; message: string }[] {
  try {
    loadTaskFile(file);
  } catch (error) {
    expect(error).toBeInstanceOf(TaskValidationError);
    return (error as TaskValidationError).problems;
  }
  throw new Error("expected the task to be rejected");
}

function taskFile(directory: string, sandbox: string): string {
  const file = join(directory, "task.yaml");
  writeFileSync(file, `name: t\ninstruction: x\nsandbox: ${sandbox}\n`);
  return file;
}

describe("task.yaml sandbox.image, build, workdir, setup", () => {
  it("defaults workdir to /workspace and setup to nothing; takes /app, /testbed and a list of commands", async () => {
    await using directory = temporaryDirectory();
    expect(loadTaskFile(taskFile(directory.path, "{}")).sandbox).toMatchObject({ workdir: "/workspace", setup: [], image: "agent-runner/sandbox:bookworm" });
    const task = loadTaskFile(taskFile(directory.path, '{ workdir: /testbed, setup: ["pip install -e .", "make deps"] }'));
    expect(task.sandbox).toMatchObject({ workdir: "/testbed", setup: ["pip install -e .", "make deps"] });
  });

  it("refuses workdirs that would shadow system directories or the runner's mounts, naming the field and the fix", async () => {
    await using directory = temporaryDirectory();
    for (const workdir of ["/", "/usr", "/usr/src/app", "/etc", "/proc", "/run/agent-runner", "/tmp/x", "/var/lib/app", "app", "/app/../etc", "/app/"]) {
      const problems = problemsOf(taskFile(directory.path, `{ workdir: ${JSON.stringify(workdir)} }`));
      expect(problems, workdir).toHaveLength(1);
      expect(problems[0]!.path).toBe("sandbox.workdir");
      expect(problems[0]!.message).toMatch(/\/workspace|expected/);
    }
    expect(workdirProblem("/usr/src/app")).toMatch(/would shadow \/usr/);
    for (const workdir of ["/app", "/testbed", "/home/user/project", "/opt/src", "/workspace"]) expect(workdirProblem(workdir), workdir).toBeNull();
  });

  it("resolves sandbox.build against the task file, refuses it together with image, and names a missing Dockerfile", async () => {
    await using directory = temporaryDirectory();
    mkdirSync(join(directory.path, "image"));
    writeFileSync(join(directory.path, "image", "Dockerfile"), "FROM scratch\n");
    const task = loadTaskFile(taskFile(directory.path, "{ build: { context: ./image, args: { A: b } } }"));
    expect(task.sandbox.build).toEqual({ context: join(directory.path, "image"), dockerfile: join(directory.path, "image", "Dockerfile"), args: { A: "b" } });
    expect(problemsOf(taskFile(directory.path, "{ image: python:3.12, build: { context: ./image } }"))).toEqual([
      { path: "sandbox.image", message: expect.stringMatching(/either sandbox.image .* or sandbox.build/) },
    ]);
    expect(problemsOf(taskFile(directory.path, "{ build: { context: ./image, dockerfile: ./other.Dockerfile } }"))[0]!.path).toBe("sandbox.build.dockerfile");
    expect(problemsOf(taskFile(directory.path, "{ build: { context: ./missing } }"))[0]!.path).toBe("sandbox.build.context");
  });
});

describe("buildInputs (the hash a built image is tagged by)", () => {
  it("is stable, changes with the Dockerfile, an argument or a context file, and ignores what .dockerignore excludes", async () => {
    await using directory = temporaryDirectory();
    const context = join(directory.path, "context");
    mkdirSync(join(context, "src"), { recursive: true });
    writeFileSync(join(context, "src", "a.txt"), "a\n");
    writeFileSync(join(context, ".dockerignore"), "cache\n*.log\n");
    mkdirSync(join(context, "cache"));
    writeFileSync(join(context, "cache", "big"), "x");
    const dockerfile = join(directory.path, "Dockerfile");
    writeFileSync(dockerfile, "FROM scratch\nCOPY src /src\n");
    const build = { context, dockerfile, args: {} as Record<string, string> };
    const first = buildInputs(build);
    expect(first.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(first.entries).toEqual([".dockerignore", "src", "src/a.txt"]);
    expect(buildInputs(build).hash).toBe(first.hash);
    writeFileSync(join(context, "cache", "big"), "changed");
    writeFileSync(join(context, "debug.log"), "noise");
    expect(buildInputs(build).hash).toBe(first.hash);
    expect(buildInputs({ ...build, args: { VERSION: "2" } }).hash).not.toBe(first.hash);
    writeFileSync(join(context, "src", "a.txt"), "b\n");
    const changedFile = buildInputs(build).hash;
    expect(changedFile).not.toBe(first.hash);
    writeFileSync(dockerfile, "FROM scratch\nCOPY src /src2\n");
    expect(buildInputs(build).hash).not.toBe(changedFile);
  });
});

describe("buildInputs: .dockerignore", () => {
  it("is read only as a regular file of at most 1 MiB: a link, a FIFO or a bigger file is a build error naming it", async () => {
    await using directory = temporaryDirectory();
    const context = join(directory.path, "context");
    mkdirSync(context);
    const dockerfile = join(directory.path, "Dockerfile");
    writeFileSync(dockerfile, "FROM scratch\n");
    const build = { context, dockerfile, args: {} as Record<string, string> };
    const ignore = join(context, ".dockerignore");
    const outside = join(directory.path, "host-file");
    writeFileSync(outside, "secret\n");
    symlinkSync(outside, ignore);
    expect(() => buildInputs(build)).toThrow(`${ignore} is a symbolic link`);
    rmSync(ignore);
    symlinkSync("/dev/zero", ignore);
    expect(() => buildInputs(build)).toThrow(`${ignore} is a symbolic link`);
    rmSync(ignore);
    execFileSync("mkfifo", [ignore]);
    expect(() => buildInputs(build)).toThrow(`${ignore} is not a regular file`);
    rmSync(ignore);
    writeFileSync(ignore, "x".repeat(1024 * 1024 + 1));
    expect(() => buildInputs(build)).toThrow(/is 1048577 bytes/);
    writeFileSync(ignore, "*.log\n");
    writeFileSync(join(context, "a.log"), "noise");
    expect(buildInputs(build).entries).toEqual([".dockerignore"]);
  });
});

describe("workdir on the host side", () => {
  it("confines absolute tool paths to the task's workdir and names it in the system prompt", async () => {
    const checker = await PermissionChecker.create(loadPolicy("worker").policy, { workdir: "/app" });
    expect(checker.check("read_file", { path: "/app/src/x.py" }).decision).toBe("allow");
    expect(checker.check("read_file", { path: "src/x.py" }).decision).toBe("allow");
    const outside = checker.check("read_file", { path: "/workspace/x.py" });
    expect(outside).toMatchObject({ decision: "deny", rule: "hard.workspace-confinement" });
    expect(outside.reason).toContain("outside /app");
    expect(checker.check("write_file", { path: "/app/.git/config" }).rule).toBe("hard.protected-path");
    expect(workspaceAgentSystemPrompt({ allowedHosts: [], workdir: "/app" })).toContain("mounted at /app");
  });
});
