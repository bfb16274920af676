import { defineConfig } from "vitest/config";

/**
 * Two projects (README "Testing"): `unit` needs no Docker daemon (fakes
 * behind our interfaces, the Docker-free run tier of tests/unit/run), `docker`
 * needs the daemon and the sandbox image. `vitest run` runs both;
 * `--project unit` (npm run test:unit) only the first.
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
      { extends: true, test: { name: "docker", include: ["tests/integration/**/*.test.ts", "tests/e2e/**/*.test.ts"] } },
    ],
  },
});
