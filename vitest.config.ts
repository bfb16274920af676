import { defineConfig } from "vitest/config";

/** The tool suite and the security probes: they run in an image without Node (issue 14), the rest of the docker tests in the default image. */
const NO_NODE_SUITE = ["tests/integration/tools-*.test.ts", "tests/integration/security-*.test.ts"];

/**
 * Three projects (README "Testing"): `unit` needs no Docker daemon (fakes
 * behind our interfaces, the Docker-free run tier of tests/unit/run);
 * `docker` and `docker-no-node` need the daemon, the sandbox image and the
 * sandbox helper (built by their global setup from src/sandbox/docker/helper).
 * `docker-no-node` runs the tool suite and the security probes in the default
 * image without Node. `vitest run` runs all three; `--project unit`
 * (npm run test:unit) only the first.
 */
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
        test: {
          name: "unit",
          include: ["tests/unit/**/*.test.ts"],
          // Keeps the project Docker-free on a machine that has Docker: a test that reaches for the daemon fails here.
          env: { DOCKER_HOST: "unix:///nonexistent/agent-runner-unit-project.sock" },
        },
      },
      {
        extends: true,
        test: {
          name: "docker",
          include: ["tests/integration/**/*.test.ts", "tests/e2e/**/*.test.ts"],
          exclude: NO_NODE_SUITE,
          globalSetup: ["tests/global-setup.ts"],
        },
      },
      {
        extends: true,
        test: {
          name: "docker-no-node",
          include: NO_NODE_SUITE,
          env: { RUNNER_TEST_PROJECT: "no-node" },
          globalSetup: ["tests/global-setup.ts", "tests/global-setup-no-node.ts"],
        },
      },
    ],
  },
});
