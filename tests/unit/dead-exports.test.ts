import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("dead exports (knip, knip.json; part of npm run check)", () => {
  it("no file, dependency or export is unused: each export has an importer outside its file (tests count), types excepted when their own file uses them", async () => {
    const { stdout } = await promisify(execFile)(join(ROOT, "node_modules/.bin/knip"), ["--no-progress", "--no-exit-code", "--reporter", "json"], {
      cwd: ROOT,
    });
    const report = JSON.parse(stdout) as { files: string[]; issues: Record<string, unknown>[] };
    const unused = report.issues.map(({ file, ...kinds }) => ({
      file,
      ...Object.fromEntries(
        Object.entries(kinds).filter(([, found]) =>
          Array.isArray(found) ? found.length > 0 : found && typeof found === "object" && Object.keys(found).length > 0,
        ),
      ),
    }));
    expect({ files: report.files, unused }).toEqual({ files: [], unused: [] });
  });
});
