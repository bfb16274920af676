import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Docker-heavy files share 2 cores; more workers only queue on the daemon.
    maxWorkers: 2,
    minWorkers: 1,
    // The JSON report lets .ci/run print a plain "N passed, N failed" line.
    reporters: ["default", ["json", { outputFile: ".test-results/vitest.json" }]],
  },
});
