/**
 * For the `docker-no-node` test project (vitest.config.ts): builds the image the tool
 * suite and the security probes run in (the default image without Node,
 * tests/helpers/test-images.ts) and hands its tag to the test workers as
 * RUNNER_NO_NODE_IMAGE (tests/helpers/docker.ts reads it in that project only).
 */
import { ensureTestImage, NO_NODE_IMAGE } from "./helpers/test-images.js";

export default async function setup(): Promise<void> {
  process.env.RUNNER_NO_NODE_IMAGE = await ensureTestImage(NO_NODE_IMAGE);
}
