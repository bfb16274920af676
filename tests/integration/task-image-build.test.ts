import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BUILD_INPUTS_LABEL, ensureTaskImage } from "../../src/sandbox/task-image.js";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

const made = new Set<string>();
afterAll(() => {
  for (const image of made) execFileSync("docker", ["image", "rm", "-f", image], { stdio: "ignore" });
});

describe("sandbox.build (dockerode buildImage, tagged by the inputs' hash)", () => {
  it("builds once, reuses the tag while the inputs are unchanged, and rebuilds when the Dockerfile changes", async () => {
    const docker = await requireDocker();
    await using context = temporaryDirectory();
    const nonce = randomUUID();
    writeFileSync(join(context.path, "greeting.txt"), `hello ${nonce}\n`);
    writeFileSync(join(context.path, ".dockerignore"), "secret.txt\n");
    writeFileSync(join(context.path, "secret.txt"), "not sent\n");
    const dockerfile = join(context.path, "Dockerfile");
    writeFileSync(dockerfile, `FROM ${SANDBOX_IMAGE}\nARG WHO=nobody\nCOPY . /opt/context/\nRUN echo "$WHO" > /opt/who\n`);
    const build = { context: context.path, dockerfile, args: { WHO: "tester" } };

    const first = await ensureTaskImage(docker, { image: SANDBOX_IMAGE, build });
    made.add(first.image);
    expect(first.source).toBe("built");
    const inspected = await docker.getImage(first.image).inspect();
    expect(inspected.Config.Labels?.[BUILD_INPUTS_LABEL]).toMatch(new RegExp(`^${first.image.split(":")[1]}`));
    const files = execFileSync(
      "docker",
      ["run", "--rm", "--entrypoint", "sh", first.image, "-c", "ls -A /opt/context; cat /opt/context/greeting.txt /opt/who"],
      { encoding: "utf8" },
    );
    expect(files).toBe(`.agent-runner.Dockerfile\n.dockerignore\nDockerfile\ngreeting.txt\nhello ${nonce}\ntester\n`);

    const second = await ensureTaskImage(docker, { image: SANDBOX_IMAGE, build });
    expect(second).toEqual({ image: first.image, source: "reused" });
    expect((await docker.getImage(second.image).inspect()).Id).toBe(inspected.Id);

    writeFileSync(dockerfile, `FROM ${SANDBOX_IMAGE}\nARG WHO=nobody\nCOPY . /opt/context/\nRUN echo "changed $WHO" > /opt/who\n`);
    const third = await ensureTaskImage(docker, { image: SANDBOX_IMAGE, build });
    made.add(third.image);
    expect(third.source).toBe("built");
    expect(third.image).not.toBe(first.image);
    expect(execFileSync("docker", ["run", "--rm", "--entrypoint", "cat", third.image, "/opt/who"], { encoding: "utf8" })).toBe("changed tester\n");
  });

  it("takes an existing image as it is, and never suggests `runner image build` for a task's own image", async () => {
    const docker = await requireDocker();
    expect(await ensureTaskImage(docker, { image: SANDBOX_IMAGE })).toEqual({ image: SANDBOX_IMAGE, source: "present" });
    const absent = `localhost:1/agent-runner-absent/${randomUUID()}:1`;
    const error = await ensureTaskImage(docker, { image: absent }).catch((caught: unknown) => caught as Error);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toContain(`sandbox.image: ${absent} is not present locally and could not be pulled`);
    expect((error as Error).message).not.toContain("runner image build");
  });
});
