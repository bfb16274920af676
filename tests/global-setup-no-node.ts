/**
 * For the `no-node` test project (vitest.config.ts): builds the image the tool
 * suite and the security probes run in (the default image without Node,
 * tests/helpers/test-images.ts) and hands its tag to the tests as
 * RUNNER_TEST_IMAGE.
 */
import type { TestProject } from "vitest/node";
import { ensureTestImage, NO_NODE_IMAGE } from "./helpers/test-images.js";

export default async function setup(project: TestProject): Promise<void> {
  const tag = await ensureTestImage(NO_NODE_IMAGE);
  project.provide("noNodeImage", tag);
}

declare module "vitest" {
  export interface ProvidedContext {
    noNodeImage: string;
  }
}
