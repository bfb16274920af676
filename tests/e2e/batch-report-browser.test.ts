/**
 * report.html of a real batch (the built CLI, real Docker, the scripted
 * model) opened in headless Chromium (Debian's, through playwright-core):
 * screenshots taken and checked by their pixels (status colours where the
 * statuses are, the diff's added and removed lines), a task's section
 * opening to its timeline and diff, the filter script working under the
 * page's CSP, and no script from the data running: task ids, tool arguments,
 * verify output and the diff carry `<script>` and `"><img onerror>`.
 * The screenshots are kept in .test-results/report-html/ for a person to see.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import type { BatchReport } from "../../src/batch/batch-report.js";
import { STATUS_COLOURS } from "../../src/batch/html-report.js";
import { launchChromium, colourDistance, pixelAt, type Hex } from "../helpers/chromium.js";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { readJson, ROOT, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";

const SCRIPT = `<script>window.__injected = "script"</script>`;
const IMG = `"><img src=x onerror="window.__injected='img'">`;
const SCREENSHOTS = join(ROOT, ".test-results", "report-html");

let browser: Browser | null = null;
afterAll(async () => {
  await browser?.close();
});

/** A task of tasks.jsonl from a task directory writeScriptedTask made in `root/<name>/` (paths relative to the JSONL file). */
function jsonlTask(root: string, name: string, id: string, options: Parameters<typeof writeScriptedTask>[1]): Record<string, unknown> {
  const written = writeScriptedTask(join(root, name), options);
  const task = JSON.parse(readFileSync(written.task, "utf8")) as Record<string, unknown> & { model: Record<string, unknown> };
  return { ...task, id, workspace: `./${name}/repo`, model: task.model.script ? { ...task.model, script: `./${name}/script.yaml` } : task.model };
}

describe("report.html in headless Chromium", () => {
  it("renders the table with status colours, opens a task to its timeline and coloured diff, filters, and runs no script from the data", async () => {
    await requireDocker();
    browser = await launchChromium();
    await using directory = temporaryDirectory("agent-runner-report-html-");
    await using home = temporaryDirectory("agent-runner-report-html-home-");
    const tasks = join(directory.path, "tasks");
    const hostileId = `${SCRIPT} fixes ${IMG}`;
    const lines = [
      jsonlTask(tasks, "writes-markup", hostileId, {
        script: {
          turns: [
            { tool_calls: [toolCall("write_file", { path: "page.html", content: `${SCRIPT}\n${IMG}\n` })] },
            // policy ci refuses sudo: a denial on the timeline.
            { tool_calls: [toolCall("run_shell", { command: `sudo -n true # ${SCRIPT}` })] },
            { content: `Done ${SCRIPT}` },
          ],
        },
        task: { name: "writes-markup", policy: "ci", verify: { command: `test -f page.html && echo '${SCRIPT}'`, timeout_sec: 60 } },
      }),
      jsonlTask(tasks, "does-nothing", "does-nothing", {
        script: { turns: [{ content: "I did nothing." }] },
        task: { name: "does-nothing", verify: { command: "test -f page.html", timeout_sec: 60 } },
      }),
    ];
    writeFileSync(join(tasks, "tasks.jsonl"), `${lines.map((line) => JSON.stringify(line)).join("\n")}\n`);
    const result = await runCli(["batch", "run", join(tasks, "tasks.jsonl"), "-j", "2", "--min-pass-rate", "0.5", "--json"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr).toBe(0);
    const { report: reportPath } = JSON.parse(result.stdout.trim().split("\n").at(-1)!) as { report: string };
    const report = readJson<BatchReport>(reportPath);
    expect(report.tasks.map((task) => [task.name, task.status])).toEqual(
      [
        [hostileId, "succeeded"],
        ["does-nothing", "failed"],
      ].sort((a, b) => (a[0]! < b[0]! ? -1 : 1)),
    );

    const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
    const problems: string[] = [];
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("dialog", (dialog) => {
      problems.push(`dialog: ${dialog.message()}`);
      void dialog.dismiss();
    });
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(`console: ${message.text()}`);
    });
    await page.goto(pathToFileURL(join(reportPath, "..", "report.html")).href);
    mkdirSync(SCREENSHOTS, { recursive: true });

    // The table: one row per task, each status cell's badge in its status colour.
    const rows = page.locator("#tasks tbody tr");
    await expect.poll(() => rows.count()).toBe(2);
    const overview = await page.screenshot({ path: join(SCREENSHOTS, "overview.png") });
    for (const task of report.tasks) {
      const badge = rows.filter({ hasText: task.name === hostileId ? "fixes" : task.name }).locator("td.status .badge");
      const box = (await badge.boundingBox())!;
      // Inside the badge's left padding: its background, not its text.
      const colour = pixelAt(overview, box.x + 3, box.y + box.height / 2);
      expect(colourDistance(colour, STATUS_COLOURS[task.status as keyof typeof STATUS_COLOURS] as Hex), `${task.name}: ${colour}`).toBeLessThanOrEqual(8);
    }
    expect(await rows.first().locator("td").first().innerText()).toBe(report.tasks[0]!.name);

    // A task's section is closed; opened, it shows the timeline (tool call, denial, verify, commit) and the diff.
    const section = page.locator("details.task").filter({ hasText: "fixes" });
    const timeline = section.locator("ol.timeline");
    expect(await timeline.isVisible()).toBe(false);
    await section.locator("summary").click();
    expect(await timeline.isVisible()).toBe(true);
    const entries = await timeline.locator("li").allInnerTexts();
    const find = (pattern: RegExp) => entries.find((entry) => pattern.test(entry));
    expect(find(/write_file \(\d+ ms\)/)).toContain(`"content":"${SCRIPT.replace(/"/g, '\\"')}`);
    expect(find(/run_shell denied \(commands\.privileges\)/)).toBeDefined();
    expect(find(/verify passed in/)).toContain(SCRIPT);
    expect(find(/^\+[\d.]+ s\s*merge\s*committed [0-9a-f]{12} on /i), entries.join("\n")).toBeDefined();
    const diff = section.locator("pre.diff");
    expect(await diff.isVisible()).toBe(true);
    expect(await diff.innerText()).toContain(`+${SCRIPT}\n+${IMG}`);
    await section.scrollIntoViewIfNeeded();
    const opened = await page.screenshot({ path: join(SCREENSHOTS, "task-opened.png"), fullPage: true });
    for (const [selector, colour] of [
      ["span.d-add", "#dafbe1"],
      ["span.d-meta", "#f6f8fa"],
    ] as const) {
      const box = (await diff.locator(selector).first().boundingBox())!;
      const scroll = (await page.evaluate("({ x: window.scrollX, y: window.scrollY })")) as { x: number; y: number };
      // A full-page screenshot is in page coordinates; bounding boxes are in the viewport's.
      const sample = pixelAt(opened, box.x + scroll.x + box.width - 4, box.y + scroll.y + box.height / 2);
      expect(colourDistance(sample, colour), `${selector}: ${sample}`).toBeLessThanOrEqual(8);
    }
    const deniedBox = (await timeline.locator("li.denied").first().boundingBox())!;
    const scroll = (await page.evaluate("({ x: window.scrollX, y: window.scrollY })")) as { x: number; y: number };
    expect(
      colourDistance(pixelAt(opened, deniedBox.x + scroll.x + 1, deniedBox.y + scroll.y + deniedBox.height / 2), STATUS_COLOURS.failed),
    ).toBeLessThanOrEqual(8);

    // The filter bar (the page's one script, allowed by its CSP hash) hides the unticked status.
    await page.locator("#filters").waitFor({ state: "visible" });
    await page.locator('#filters input[value="succeeded"]').uncheck();
    expect(await rows.filter({ hasText: "fixes" }).isVisible()).toBe(false);
    expect(await rows.filter({ hasText: "does-nothing" }).isVisible()).toBe(true);
    await page.screenshot({ path: join(SCREENSHOTS, "filtered.png") });

    // None of the data's markup became an element, and none of it ran.
    expect(await page.evaluate("window.__injected")).toBeUndefined();
    expect(await page.locator("script").count()).toBe(1);
    expect(await page.locator("img").count()).toBe(0);
    expect(problems).toEqual([]);
  });
});
