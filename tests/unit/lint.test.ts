import { fileURLToPath } from "node:url";
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("the lint of npm run check (eslint.config.js)", () => {
  it("catches a floating promise, an async condition, an await of a non-promise and an unused local", async () => {
    const eslint = new ESLint({ cwd: ROOT, ignore: false });
    const [result] = await eslint.lintFiles(["tests/fixtures/lint/promise-bugs.ts"]);
    const found = result!.messages.map((message) => `${message.line} ${message.ruleId}`);
    expect(result!.messages.filter((message) => message.fatal)).toEqual([]);
    expect(found).toEqual([
      "9 @typescript-eslint/no-floating-promises",
      "13 @typescript-eslint/no-misused-promises",
      "17 @typescript-eslint/await-thenable",
      "21 @typescript-eslint/no-unused-vars",
    ]);
  });
});
