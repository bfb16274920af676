/**
 * Security invariant 1 (DESIGN.md): the container mounts the workspace, plus
 * read-only git metadata with credentials hidden, and nothing else from the
 * host: no Docker socket, no home directory, no host environment variable the
 * task did not name. One real run (runTask → Docker → scripted model) probes
 * the container from inside; each `it` checks one part of what it saw.
 */
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HELPER_CONTAINER_PATH } from "../../src/sandbox/docker/helper-path.js";
import { createGitRepository } from "../helpers/git-repository.js";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { parseShellResult, randomToken, runScriptedTask, shellTurn, writeTurn, describeRun, type ScriptedRun } from "./security-harness.js";

interface Mount {
  root: string;
  mountPoint: string;
  options: string[];
  fsType: string;
}

/** Parses /proc/self/mountinfo (man 5 proc). */
function parseMountInfo(text: string): Mount[] {
  const unescape = (value: string) => value.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
  return text
    .trim()
    .split("\n")
    .map((line) => {
      const fields = line.split(" ");
      const separator = fields.indexOf("-");
      return {
        root: unescape(fields[3]!),
        mountPoint: unescape(fields[4]!),
        options: fields[5]!.split(","),
        fsType: fields[separator + 1]!,
      };
    });
}

/** File systems that are not host directories (the container's own root, kernel views, Docker's tmpfs). */
const VIRTUAL_FILESYSTEMS = new Set(["overlay", "proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "shm", "securityfs", "devtmpfs"]);
/** Where the container sees its own git directory: a fixed path that names nothing of the host's. */
const CONTAINER_GIT = "/run/agent-runner/git";
/** The read-only repository view (objects, no refs) the runner's own reads use, and its object store: the alternate of the container's. */
const CONTAINER_REPOSITORY = "/run/agent-runner/repository";
const CONTAINER_OBJECTS = `${CONTAINER_REPOSITORY}/objects`;
/** Files Docker itself bind-mounts into every container, from its own per-container directory. */
/** A file on the host that exists only if the fsmonitor the agent configures in its git ran on the host. */
const FSMONITOR_MARKER = join(tmpdir(), `agent-runner-fsmonitor-${process.pid}-${Date.now()}`);
/** Content only the agent's own commit holds (the run's delivery commit does not: the agent removes the file). */
const AGENT_BLOB_NONCE = `${process.pid}-${Date.now()}`;

const DOCKER_MANAGED = /\/containers\/[0-9a-f]{64}\/(resolv\.conf|hostname|hosts)$/;

function environmentOf(dump: string): Map<string, string> {
  const entries = new Map<string, string>();
  for (const line of dump.split("\n")) {
    const equals = line.indexOf("=");
    if (equals > 0) entries.set(line.slice(0, equals), line.slice(equals + 1));
  }
  return entries;
}

describe("security invariant 1: only the workspace, sanitized git metadata and named variables reach the container", () => {
  const urlToken = randomToken("tok3n");
  const bearerToken = randomToken("SECRETTOKEN");
  const canaries: Record<string, string> = {
    SECRET_CANARY: randomToken("canary-secret-"),
    AWS_SECRET_ACCESS_KEY: randomToken("canary-aws-"),
    GITHUB_TOKEN: randomToken("canary-gh-"),
    OPENAI_API_KEY: randomToken("canary-openai-"),
    SSH_AUTH_SOCK: `/tmp/${randomToken("canary-ssh-")}/agent.sock`,
  };
  const passedValue = randomToken("passed-");
  let repository: Awaited<ReturnType<typeof createGitRepository>>;
  let commonGitDirectory: string;
  let run: ScriptedRun;
  let hostEnvironment: NodeJS.ProcessEnv;
  let containerEnvironment: string[] = [];
  const saved: Record<string, string | undefined> = {};
  let result: (index: number) => ReturnType<typeof parseShellResult>;

  beforeAll(async () => {
    await requireDocker();
    repository = createGitRepository({ "app.txt": "hello\n" }, { prefix: "agent-runner-sec-mounts-" });
    // Credentials a user may well have in a repository config.
    repository.git("config", "remote.origin.url", `https://user:${urlToken}@example.invalid/x.git`);
    repository.git("config", "http.extraheader", `Authorization: Bearer ${bearerToken}`);
    repository.git("config", "credential.helper", `store --file=/root/.git-credentials-${urlToken}`);
    commonGitDirectory = realpathSync(join(repository.root, ".git"));

    // Host variables live in the runner's own environment, as in real use.
    for (const name of [...Object.keys(canaries), "PASSED_VAR"]) saved[name] = process.env[name];
    Object.assign(process.env, canaries, { PASSED_VAR: passedValue });
    hostEnvironment = process.env;
    try {
      run = await runScriptedTask({
        repository: repository.root,
        sandbox: { pass_env: ["PASSED_VAR", "NOT_SET_ANYWHERE"], env: { TASK_LITERAL: "literal-value" } },
        hostEnvironment,
        // The container's environment as Docker holds it (what init and every process start from).
        onSandboxCreated: async (spec, sandbox) => {
          if (spec.agentId === "main") containerEnvironment = (await (await requireDocker()).getContainer(sandbox.id).inspect()).Config.Env ?? [];
        },
        turns: [
          /* 0 */ shellTurn("cat /proc/self/mountinfo"),
          /* 1 */ shellTurn(
            "echo '--- self'; tr '\\0' '\\n' < /proc/$$/environ; echo '--- init'; cat /proc/1/environ >/dev/null 2>&1; echo \"init-environ-rc=$?\"",
          ),
          /* 2 */ shellTurn(
            "for p in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock /var/run/docker /run/docker; do " +
              'if [ -e "$p" ]; then echo "present $p"; fi; done; ' +
              "find / \\( -path /proc -o -path /sys \\) -prune -o -type s -print 2>/dev/null; echo end",
          ),
          /* 3 */ writeTurn("app.txt", "changed\n"),
          /* 4 */ shellTurn(
            'git status --porcelain; echo "status-rc=$?"; git diff; echo "diff-rc=$?"; git log --format=%s; echo "log-rc=$?"; git rev-parse --git-common-dir',
          ),
          /* 5 */ shellTurn(
            // The needles are assembled at run time so the command text itself never matches.
            "A=tok3; B=n; C=SECRET; D=TOKEN; COMMON=$(git rev-parse --git-common-dir); " +
              'echo "--- config list"; git config --list --show-origin; ' +
              'echo "--- get"; git config --get remote.origin.url; echo "get-rc=$?"; ' +
              'echo "--- cat"; cat "$COMMON/config"; ' +
              'echo "--- grep git"; grep -r -a -l -e "$A$B" -e "$C$D" -e extraheader -e example.invalid "$COMMON" /workspace; echo "grep-git-rc=$?"; ' +
              'echo "--- grep rest"; grep -r -a -l -e "$A$B" -e "$C$D" /etc /tmp /opt /home /root /var /usr/local 2>/dev/null; echo "--- end"',
          ),
          /* 6 */ shellTurn(
            'COMMON=$(git rev-parse --git-common-dir); touch "$COMMON/written-by-agent"; echo "touch-rc=$?"; ' +
              `printf '[core]\\n\\tfsmonitor = touch ${FSMONITOR_MARKER}\\n\\thooksPath = /tmp\\n' >> "$COMMON/config"; echo "append-rc=$?"; ` +
              `echo agent-only-content-${AGENT_BLOB_NONCE} > only-agent.txt; git add only-agent.txt; ` +
              'git commit -q -am agent-commit; echo "commit-rc=$?"; git rev-parse HEAD:only-agent.txt; git log --format=%s -1; ' +
              'git rm -q only-agent.txt; git commit -q -m agent-removes; echo "second-commit-rc=$?"; ' +
              'touch /run/agent-runner/repository/objects/written-by-agent /run/agent-runner/repository/config; echo "objects-touch-rc=$?"',
          ),
          /* 7: every place git keeps a path, and the kernel's two mount tables */
          shellTurn(
            'echo "--- dotgit"; cat /workspace/.git; GD=$(git rev-parse --git-dir); echo "--- alternates"; cat "$GD/objects/info/alternates"; ' +
              'echo "--- rev-parse"; git rev-parse --git-dir --git-common-dir --show-toplevel; echo "--- worktrees"; git worktree list --porcelain; ' +
              'echo "--- mounts"; cat /proc/self/mounts; echo "--- end"',
          ),
        ],
      });
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    result = (index) => parseShellResult(run.toolResults[index]);
    expect(run.toolResults.length, describeRun(run)).toBe(8);
  });

  afterAll(async () => {
    run?.dispose();
    await repository?.[Symbol.asyncDispose]();
  });

  it("bind-mounts from the host only /workspace (rw) and an allow-list of git metadata (ro) with a sanitized config", () => {
    const mounts = parseMountInfo(result(0).stdout);
    const hostMounts = mounts.filter((mount) => !VIRTUAL_FILESYSTEMS.has(mount.fsType));
    const dockerOwn = hostMounts.filter(
      (mount) =>
        (["/etc/resolv.conf", "/etc/hostname", "/etc/hosts"].includes(mount.mountPoint) && DOCKER_MANAGED.test(mount.root)) ||
        (mount.mountPoint === "/usr/sbin/docker-init" && mount.options.includes("ro")),
    );
    const ours = hostMounts.filter((mount) => !dockerOwn.includes(mount));
    const summary = ours.map((mount) => `${mount.mountPoint} ${mount.options.includes("ro") ? "ro" : "rw"}`).sort();
    // The container's own git directory (writable, from its scratch space) and the repository's objects (read-only).
    const gitEntries = [`${CONTAINER_GIT} rw`, `${CONTAINER_REPOSITORY} ro`, `${CONTAINER_OBJECTS} ro`];
    // The writable places outside /workspace are the run's own (sandbox.limits.disk); the image itself is read-only.
    const scratch = ["/tmp rw", "/var/tmp rw", "/run/lock rw"];
    // The sandbox helper, read-only, from a copy in the runner's private temporary directory (docs/sandbox-helper.md).
    expect(summary).toEqual([`/workspace rw`, "/workspace/.git ro", `${HELPER_CONTAINER_PATH} ro`, ...scratch, ...gitEntries].sort());
    expect(ours.find((mount) => mount.mountPoint === HELPER_CONTAINER_PATH)!.root).toMatch(/\/agent-runner-helper-\d+\/agent-runner-sandboxd-[0-9a-f]{16}$/);
    expect(mounts.find((mount) => mount.mountPoint === "/")!.options).toContain("ro");
    const byTarget = new Map(ours.map((mount) => [mount.mountPoint, mount]));
    // The run's own files (worktree, scratch directories, the sanitized config) come from the run's own
    // filesystem: their roots are paths inside it, which name neither the run directory nor RUNNER_HOME.
    expect(byTarget.get("/workspace")!.root).toBe("/worktree");
    expect(byTarget.get(CONTAINER_GIT)!.root).toMatch(/^\/sandboxes\/s-[^/]+\/git$/);
    expect(byTarget.get(CONTAINER_OBJECTS)!.root).toBe(`${commonGitDirectory}/objects`);
    // No Docker socket and no home directory (the host's or any) arrive through any mount, virtual or not.
    for (const mount of mounts) {
      expect(mount.mountPoint).not.toMatch(/docker\.sock|containerd|^\/root|^\/home/);
      expect(mount.mountPoint).not.toBe(homedir());
      expect(mount.root).not.toMatch(/docker\.sock|containerd\.sock/);
    }
  });

  it("names no host path of the run, RUNNER_HOME or the home directory anywhere, and of the repository only the git metadata mounts' roots", () => {
    const text = result(7).stdout;
    const section = (name: string) => text.slice(text.indexOf(`--- ${name}\n`) + name.length + 5, text.indexOf("\n---", text.indexOf(`--- ${name}\n`) + 1));
    expect(section("dotgit")).toBe(`gitdir: ${CONTAINER_GIT}`);
    expect(section("alternates")).toBe(CONTAINER_OBJECTS);
    expect(section("rev-parse")).toBe(`${CONTAINER_GIT}\n${CONTAINER_GIT}\n/workspace`);
    expect(section("worktrees")).not.toContain(repository.root);
    const mountTable = section("mounts");
    const mountInfo = result(0).stdout;
    for (const hostPath of [repository.root, realpathSync(repository.root), run.runnerHome, realpathSync(run.runnerHome), `${homedir()}/`]) {
      expect(text, `the probe's output names ${hostPath}`).not.toContain(hostPath);
      expect(mountTable).not.toContain(hostPath);
    }
    for (const hostPath of [run.runnerHome, realpathSync(run.runnerHome), `/runs/${run.runId}`, `${homedir()}/`]) expect(mountInfo).not.toContain(hostPath);
    // What cannot be masked: a bind mount's root is its source's path within the source's filesystem, so the
    // read-only git metadata mounts name the repository's git directory (docs/security.md "Security model"). Exactly those.
    const naming = parseMountInfo(mountInfo).filter((mount) => `${mount.root} ${mount.mountPoint}`.includes(realpathSync(repository.root)));
    const gitDirectory = realpathSync(join(repository.root, ".git"));
    expect(naming.map((mount) => `${mount.root} -> ${mount.mountPoint}`).sort()).toEqual([`${gitDirectory}/objects -> ${CONTAINER_OBJECTS}`].sort());
    expect(naming.every((mount) => mount.root.startsWith(`${gitDirectory}/`))).toBe(true);
  });

  it("has no Docker (or containerd) socket, nor any other Unix socket", () => {
    const { stdout } = result(2);
    expect(stdout).not.toMatch(/present .*sock/);
    expect(stdout).not.toContain("present");
    // The only line `find -type s` may leave is our own end marker.
    expect(stdout.trim().split("\n")).toEqual(["end"]);
  });

  it("passes host variables only when named in sandbox.pass_env", async () => {
    const dump = result(1).stdout;
    const [selfDump, initDump] = dump.split("--- init");
    // init runs as root (with the daemon): the agent cannot read its environment at all.
    expect(initDump).toContain("init-environ-rc=1");
    const containerEnvironments = [environmentOf(selfDump!), environmentOf(containerEnvironment.join("\n"))];
    for (const environment of containerEnvironments) {
      expect(environment.get("PASSED_VAR")).toBe(passedValue);
      expect(environment.get("TASK_LITERAL")).toBe("literal-value");
      for (const name of Object.keys(canaries)) expect(environment.has(name), name).toBe(false);
      expect(environment.has("NOT_SET_ANYWHERE")).toBe(false);
    }
    for (const value of Object.values(canaries)) expect(dump).not.toContain(value);

    // Generic check: no other host variable came along either. A host variable may
    // only show up with the host's value when the image or the runner sets that
    // same value itself (PATH, LANG, ...), never because it was inherited.
    const imageEnvironment = new Map(
      ((await (await requireDocker()).getImage(SANDBOX_IMAGE).inspect()).Config.Env ?? []).map((entry) => {
        const equals = entry.indexOf("=");
        return [entry.slice(0, equals), entry.slice(equals + 1)] as const;
      }),
    );
    const leaked: string[] = [];
    for (const [name, value] of Object.entries(hostEnvironment)) {
      if (value === undefined || value.length < 4 || name === "PASSED_VAR") continue;
      if (imageEnvironment.get(name) === value) continue;
      if (["PATH", "LANG", "HOME", "HOSTNAME", "PWD", "SHLVL", "_"].includes(name)) continue;
      for (const environment of containerEnvironments) if (environment.get(name) === value) leaked.push(name);
    }
    expect(leaked).toEqual([]);
  });

  it("runs git (status, diff, log) inside the container", () => {
    const { stdout } = result(4);
    expect(stdout).toContain(" M app.txt");
    expect(stdout).toContain("status-rc=0");
    expect(stdout).toMatch(/-hello\n\+changed/);
    expect(stdout).toContain("diff-rc=0");
    expect(stdout).toMatch(/initial\nlog-rc=0/);
    expect(stdout.trim().split("\n").at(-1)).toBe(CONTAINER_GIT);
  });

  it("hides the repository's credentials from the container (git config, cat, grep)", () => {
    const { stdout, stderr } = result(5);
    for (const secret of [urlToken, bearerToken, "tok3n", "SECRETTOKEN", "example.invalid", "extraheader", "git-credentials"]) {
      expect(stdout).not.toContain(secret);
      expect(stderr).not.toContain(secret);
    }
    expect(stdout).toContain("get-rc=1");
    // grep read everything in the git dir and the workspace (no permission errors) and found nothing.
    expect(stdout).toContain("grep-git-rc=1");
    expect(stdout).toMatch(/--- grep rest\n--- end/);
    // It did read a config: the sanitized one.
    expect(stdout).toMatch(/--- cat\n\[core\]\n\trepositoryformatversion = 0/);
  });

  it("lets the agent write only its container's own git directory: the host's repository gets nothing of it", () => {
    const { stdout, stderr } = result(6);
    // Index, config, objects and refs of its own: add and commit work, as in any clone (issue 27 item 1).
    expect(stdout, stderr).toContain("touch-rc=0");
    expect(stdout).toContain("append-rc=0");
    expect(stdout).toContain("commit-rc=0");
    expect(stdout).toContain("second-commit-rc=0");
    const agentBlob = /^([0-9a-f]{40})$/m.exec(stdout)?.[1];
    expect(agentBlob).toBeDefined();
    // The repository's own objects stay read-only.
    expect(stdout).toMatch(/objects-touch-rc=[1-9]/);
    // The host's repository: the branch head is the runner's commit, no object, file or ref the agent's git wrote,
    // and the fsmonitor the agent configured never ran on the host (the runner committed after it was set).
    expect(repository.git("log", "--format=%s", "-1", run.report.branch!)).not.toMatch(/agent-commit|agent-removes/);
    expect(() => repository.git("cat-file", "-e", agentBlob!)).toThrow();
    expect(existsSync(join(commonGitDirectory, "written-by-agent"))).toBe(false);
    expect(readFileSync(join(commonGitDirectory, "config"), "utf8")).not.toContain("fsmonitor");
    expect(repository.git("for-each-ref", "--format=%(refname)")).not.toMatch(/agent/);
    expect(existsSync(FSMONITOR_MARKER)).toBe(false);
  });
});

describe("security invariant 1: credentials kept elsewhere in the git dir stay hidden too", () => {
  // `git config --worktree` (extensions.worktreeConfig) writes the main worktree's
  // settings to <common>/config.worktree, and every submodule keeps its own config
  // (with its remote URL) in <common>/modules/<name>/config: both are credentials a
  // user can have without ever pasting them into .git/config.
  const worktreeToken = randomToken("WTSECRET");
  const submoduleToken = randomToken("SUBSECRET");
  let repository: Awaited<ReturnType<typeof createGitRepository>>;
  let run: ScriptedRun;

  beforeAll(async () => {
    await requireDocker();
    repository = createGitRepository({ "app.txt": "hello\n" }, { prefix: "agent-runner-sec-mounts2-" });
    repository.git("config", "extensions.worktreeConfig", "true");
    repository.git("config", "--worktree", "http.extraheader", `Authorization: Bearer ${worktreeToken}`);
    const submoduleGitDirectory = join(repository.root, ".git", "modules", "vendored");
    repository.git("init", "-q", "--bare", submoduleGitDirectory);
    repository.git("config", "-f", join(submoduleGitDirectory, "config"), "remote.origin.url", `https://user:${submoduleToken}@example.invalid/v.git`);
    run = await runScriptedTask({
      repository: repository.root,
      turns: [
        shellTurn(
          'A=WTSEC; B=RET; C=SUBSEC; D=RET; COMMON=$(git rev-parse --git-common-dir); git status --porcelain; echo "status-rc=$?"; ' +
            'grep -r -a -l -e "$A$B" -e "$C$D" "$COMMON" /workspace; echo "grep-rc=$?"',
        ),
      ],
    });
  });
  afterAll(async () => {
    run?.dispose();
    await repository?.[Symbol.asyncDispose]();
  });

  it("does not expose <common>/config.worktree or <common>/modules/*/config to the container", () => {
    const { stdout, stderr } = parseShellResult(run.toolResults[0]);
    expect(stdout, describeRun(run)).toContain("status-rc=0");
    expect(stdout).not.toContain(worktreeToken);
    expect(stdout).not.toContain(submoduleToken);
    // grep lists the files that hold a token: there must be none.
    expect(stdout.replace(/status-rc=0\n/, "")).toBe("grep-rc=1");
    expect(stderr).toBe("(empty)");
  });
});
