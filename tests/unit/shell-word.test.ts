import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { shellWord } from "../../src/process/shell-word.js";

describe("shellWord", () => {
  it.each(["it's.txt", "'; touch /tmp/pwned; '", "$(id)", "`id`", "a b\nc", "'", "", "\\'"])("bash reads %j back as one word, running nothing", (value) => {
    expect(execFileSync("bash", ["-c", `printf %s ${shellWord(value)}`], { encoding: "utf8" })).toBe(value);
  });
});
