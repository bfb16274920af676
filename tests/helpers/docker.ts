import { lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Docker from "dockerode";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import { parseAllowEntry, type AllowRule } from "../../src/sandbox/network-allow-list.js";
import type { Sandbox, SandboxSpec } from "../../src/sandbox/sandbox.js";

/**
 * The image sandboxes of this test file use: RUNNER_TEST_IMAGE, else in the
 * `docker-no-node` test project (vitest.config.ts) the default image without Node
 * that its global setup built, else the default image.
 */
export const SANDBOX_IMAGE = process.env.RUNNER_TEST_IMAGE ?? projectImage() ?? "agent-runner/sandbox:bookworm";

function projectImage(): string | undefined {
  if (process.env.RUNNER_TEST_PROJECT !== "no-node") return undefined;
  const image = process.env.RUNNER_NO_NODE_IMAGE;
  if (!image)
    throw new Error("the docker-no-node test project runs without RUNNER_NO_NODE_IMAGE: its global setup (tests/global-setup-no-node.ts) did not run");
  return image;
}

/**
 * Integration tests (and benchmarks) need a running Docker daemon and the
 * sandbox image (`make setup` provides both). They never skip: a missing
 * daemon fails them.
 */
export async function requireDocker(image = SANDBOX_IMAGE): Promise<Docker> {
  const docker = new Docker();
  try {
    await docker.ping();
  } catch (error) {
    throw new Error(`this needs a Docker daemon (run \`make setup\`): ${(error as Error).message}`);
  }
  try {
    await docker.getImage(image).inspect();
  } catch {
    throw new Error(`this needs the sandbox image ${image} (run \`make setup\`)`);
  }
  return docker;
}

let counter = 0;

/** Parent of the test sandboxes' writable directories outside /workspace (each container's own is removed with it). */
const TEST_SCRATCH_DIRECTORY = join(tmpdir(), "agent-runner-test-scratch");

/**
 * The spec tests use: `workspace` at /workspace, uid 1000, no network, modest
 * limits, a monitored 10 GiB disk limit; override any part.
 */
export function testSandboxSpec(workspace: string, overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  counter += 1;
  return {
    runId: `test-${process.pid}-${Date.now().toString(36)}-${counter}`,
    agentId: "main",
    image: SANDBOX_IMAGE,
    workspace: { hostPath: workspace },
    readOnlyMounts: [],
    env: { HOME: "/tmp", PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8" },
    user: { uid: 1000, gid: 1000 },
    network: null,
    limits: { cpus: 1, memoryBytes: 512 * 1024 * 1024, pids: 256, fileSizeBytes: 1024 ** 3 },
    disk: { limitBytes: 10 * 1024 ** 3, enforcement: "monitor", scratchDirectory: TEST_SCRATCH_DIRECTORY },
    ...overrides,
  };
}

/** A sandbox on {@link testSandboxSpec}. */
export function createTestSandbox(workspace: string, overrides: Partial<SandboxSpec> = {}): Promise<Sandbox> {
  return new DockerSandboxProvider().create(testSandboxSpec(workspace, overrides));
}

/** Allow-list rules from task.yaml-style entries; throws on a bad entry. */
export function allowRules(allow: string[]): AllowRule[] {
  return allow.map((entry) => {
    const parsed = parseAllowEntry(entry);
    if (typeof parsed === "string") throw new Error(parsed);
    return parsed;
  });
}

/**
 * A temporary host directory holding `files`, owned by uid/gid 1000 (the
 * sandbox user in tests) so the sandbox can write to it. `await using` removes it.
 */
export function createSandboxWorkspace(files: Record<string, string | Buffer> = {}, uid = 1000) {
  const root = mkdtempSync(join(tmpdir(), "agent-runner-test-ws-"));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  chownTree(root, uid, uid);
  return {
    path: root,
    async [Symbol.asyncDispose]() {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

function chownTree(path: string, uid: number, gid: number): void {
  lchownSync(path, uid, gid);
  if (!lstatSync(path).isDirectory()) return;
  for (const name of readdirSync(path)) chownTree(join(path, name), uid, gid);
}
