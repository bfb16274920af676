// An image that is not there, found by the provider's own check (a library
// caller, or an image removed after the pre-flight): the error names the
// image and a fix that fits it, and its reason says what failed (issue 13).
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SandboxError } from "../../src/errors.js";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import { outcomeOfStartFailure } from "../../src/batch/outcomes.js";
import { requireDocker } from "../helpers/docker.js";

describe("DockerSandboxProvider: an absent image", () => {
  it("a task's own image: names it, suggests docker pull / docker build or sandbox.build, never `runner image build`; reason image_missing", async () => {
    const docker = await requireDocker();
    const absent = `localhost:1/agent-runner-absent/${randomUUID()}:1`;
    const error = await new DockerSandboxProvider({ docker }).checkReady(absent, { egress: false }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(SandboxError);
    expect((error as SandboxError).message).toBe(
      `sandbox image ${absent} is not present; pull or build it yourself (docker pull ${absent} / docker build -t ${absent} ...), or give sandbox.build instead`,
    );
    expect((error as SandboxError).reason).toBe("image_missing");
    expect(outcomeOfStartFailure(error)).toEqual({ status: "error", reason: "image_missing", error: (error as SandboxError).message });
  });

  it("the egress proxy's image: named as the proxy's, with the fix for that image; reason image_missing", async () => {
    const docker = await requireDocker();
    const absent = `localhost:1/agent-runner-absent-proxy/${randomUUID()}:1`;
    const provider = new DockerSandboxProvider({ docker, proxyImage: absent });
    const error = await provider.checkReady("agent-runner/sandbox:bookworm", { egress: true }).catch((caught: unknown) => caught);
    expect((error as SandboxError).message).toContain(`runs in the runner's image ${absent}, which is not present; pull or build it yourself`);
    expect((error as SandboxError).reason).toBe("image_missing");
  });
});
