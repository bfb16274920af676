import { defineConfig } from "vitest/config";

/** The tool suite and the security probes: they run in an image without Node (issue 14), the rest in the default image. */
const NO_NODE_SUITE = ["tests/integration/tools-*.test.ts", "tests/integration/security-*.test.ts"];

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Docker-heavy files share 2 cores; more workers only queue on the daemon.
    maxWorkers: 2,
    minWorkers: 1,
    // The JSON report lets .ci/run print a plain "N passed, N failed" line.
    reporters: ["default", ["json", { outputFile: ".test-results/vitest.json" }]],
    projects: [
      {
        extends: true,
        test: { name: "default", include: ["tests/**/*.test.ts"], exclude: NO_NODE_SUITE, globalSetup: ["tests/global-setup.ts"] },
      },
      {
        extends: true,
        test: { name: "no-node", include: NO_NODE_SUITE, env: { RUNNER_TEST_PROJECT: "no-node" }, globalSetup: ["tests/global-setup.ts", "tests/global-setup-no-node.ts"] },
      },
    ],
  },
});
