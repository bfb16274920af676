import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("docs", () => {
  it("docs/architecture.md names only files that exist (its invariant → file → test table stays true)", () => {
    const text = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");
    const paths = [...new Set(text.match(/\b(?:src|tests)\/[\w./-]+\.(?:ts|cjs)\b/g) ?? [])];
    expect(paths.length).toBeGreaterThan(20);
    expect(paths.filter((path) => !existsSync(join(ROOT, path)))).toEqual([]);
  });

  it("docs/agency.md names only files that exist", () => {
    const text = readFileSync(join(ROOT, "docs/agency.md"), "utf8");
    const paths = [...new Set(text.match(/\b(?:src|tests|bench)\/[\w./-]+\.ts\b/g) ?? [])];
    expect(paths.length).toBeGreaterThan(3);
    expect(paths.filter((path) => !existsSync(join(ROOT, path)))).toEqual([]);
  });

  it("docs/scale-out.md names only files that exist", () => {
    const text = readFileSync(join(ROOT, "docs/scale-out.md"), "utf8");
    const paths = [...new Set(text.match(/\b(?:src|tests|bench)\/[\w./-]+\.ts\b/g) ?? [])];
    expect(paths.length).toBeGreaterThan(3);
    expect(paths.filter((path) => !existsSync(join(ROOT, path)))).toEqual([]);
  });

  it("README.md and docs/ never point outside the repository", () => {
    const docs = readdirSync(join(ROOT, "docs"))
      .filter((name) => name.endsWith(".md"))
      .map((name) => `docs/${name}`);
    for (const file of ["README.md", "CONTRIBUTING.md", ...docs]) {
      expect(readFileSync(join(ROOT, file), "utf8"), file).not.toMatch(/\.\.\/shared\//);
    }
  });
});
