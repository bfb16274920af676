import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** GitHub's heading anchor: lower case, punctuation but `-` and `_` dropped, spaces to `-`. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of a markdown file's headings (outside code fences). */
function anchors(file: string): Set<string> {
  const found = new Set<string>();
  let fenced = false;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6} (.+)$/.exec(line);
    if (heading) found.add(anchorOf(heading[1]!.replace(/`/g, "")));
  }
  return found;
}

/** The anchors of a file's headings, and of their short names (a heading `Ceilings: what …` is named "Ceilings" too). */
function headingNames(file: string): Set<string> {
  const names = new Set(anchors(file));
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const short = /^#{1,6} ([^:\n]+):/.exec(line)?.[1];
    if (short) names.add(anchorOf(short.replace(/`/g, "")));
  }
  return names;
}

/** Every relative markdown link `[label](target)` outside code fences and inline code. */
function links(file: string): string[] {
  const found: string[] = [];
  let fenced = false;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    if (fenced) continue;
    for (const match of line.replace(/`[^`]*`/g, "").matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)) {
      if (!/^[a-z]+:/.test(match[1]!)) found.push(match[1]!);
    }
  }
  return found;
}

const pages = [
  "README.md",
  "CONTRIBUTING.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];

describe("README and docs links", () => {
  it("resolve: every relative link names a file that exists, and every #anchor a heading of it", () => {
    const broken: string[] = [];
    for (const page of pages) {
      const file = join(ROOT, page);
      for (const link of links(file)) {
        const [path, anchor] = link.split("#") as [string, string | undefined];
        const target = path === "" ? file : join(dirname(file), decodeURIComponent(path));
        if (!existsSync(target)) broken.push(`${page}: ${link} (no file ${relative(ROOT, target)})`);
        else if (anchor && statSync(target).isFile() && target.endsWith(".md") && !anchors(target).has(anchor))
          broken.push(`${page}: ${link} (no heading #${anchor})`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("link both ways: the README names every docs page, and every docs page links back to the README", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const docs = pages.filter((page) => page.startsWith("docs/"));
    expect(docs.filter((page) => !readme.includes(`](${page})`))).toEqual([]);
    expect(docs.filter((page) => !readFileSync(join(ROOT, page), "utf8").includes("](../README.md)"))).toEqual([]);
  });

  it('the source\'s pointers into the docs (`docs/<page>.md "<Heading>"`) name a heading that exists', () => {
    const files = (directory: string): string[] =>
      readdirSync(directory, { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory() ? files(join(directory, entry.name)) : entry.name.endsWith(".ts") ? [join(directory, entry.name)] : [],
      );
    const broken: string[] = [];
    let checked = 0;
    for (const file of files(join(ROOT, "src"))) {
      for (const match of readFileSync(file, "utf8").matchAll(/(docs\/[a-z0-9-]+\.md) "([^"\n]+)"/g)) {
        const page = join(ROOT, match[1]!);
        checked += 1;
        if (!existsSync(page)) broken.push(`${relative(ROOT, file)}: ${match[0]} (no such page)`);
        else if (!headingNames(page).has(anchorOf(match[2]!.replace(/`/g, "")))) broken.push(`${relative(ROOT, file)}: ${match[0]} (no such heading)`);
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(broken).toEqual([]);
  });

  it("keep the README a front door: at most 250 lines", () => {
    expect(readFileSync(join(ROOT, "README.md"), "utf8").split("\n").length).toBeLessThanOrEqual(250);
  });
});
