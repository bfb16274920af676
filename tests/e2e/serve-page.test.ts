/**
 * runner serve's page in Debian's headless Chromium through playwright-core
 * (issue 23 "Done when"): a run started through the page's API asks for an
 * approval that the inbox answers from the keyboard; two browser contexts
 * follow the run live; the SSE connections are cut mid-run and the page
 * resumes with no duplicate and no gap (rendered events counted against
 * events.jsonl); hostile text in tool output, file names and model text never
 * runs; a 50 000-event run keeps the DOM bounded and the JS heap flat; diff
 * review → Merge lands the verified commit. The Runner is the Docker-free tier.
 */
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen } from "../../src/server/listen.js";
import { writeAgency } from "../helpers/agency-fixture.js";
import { launchChromium } from "../helpers/chromium.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsFile, fakeShell, Gates, toolCall, writeScriptedTask } from "../helpers/fake-runner.js";
import { allSse, fakeServer, TOKEN } from "../helpers/server-client.js";
import { envelopeLine, stepLines, syntheticRun } from "../helpers/synthetic-run.js";

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

async function openPage(url: string, path: string): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on("dialog", (dialog) => {
    throw new Error(`a dialog opened: ${dialog.message()}`);
  });
  await page.goto(`${url}${path}${path.includes("?") ? "&" : "?"}token=${TOKEN}`);
  return page;
}

/**
 * Runs in the page (source text: this file is typed without the DOM): keeps every state of the connection badge
 * (`data-state`: each mutation's old value, then the current one) from now on, read back by `connectionStates()`.
 */
const RECORD_CONNECTION_STATES = `(() => {
  const badge = document.getElementById("connection");
  const seen = [];
  const observer = new MutationObserver((records) => { for (const record of records) seen.push(record.oldValue ?? ""); });
  observer.observe(badge, { attributes: true, attributeFilter: ["data-state"], attributeOldValue: true });
  globalThis.connectionStates = () => {
    for (const record of observer.takeRecords()) seen.push(record.oldValue ?? "");
    return [...seen, badge.dataset.state ?? ""];
  };
})()`;

/** Sequence numbers the run page rendered: each entry's, and each tool card's result. */
function renderedSequences(page: Page): Promise<number[]> {
  return page.$$eval("[data-sequence], [data-result-sequence]", (elements) =>
    elements.flatMap((element) =>
      [element.getAttribute("data-sequence"), element.getAttribute("data-result-sequence")].filter((value) => value !== null).map(Number),
    ),
  );
}

describe("runner serve: the page", () => {
  it("approval from the inbox, two live viewers, an SSE cut mid-run resumed with no gap and no duplicate, then Merge", async () => {
    await using directory = temporaryDirectory();
    const gates = new Gates();
    const script = {
      turns: [
        { tool_calls: [toolCall("run_shell", { command: "git push origin main" })] },
        { tool_calls: [toolCall("run_shell", { command: "wait-for cut" })] },
        { tool_calls: [toolCall("run_shell", { command: "echo three >> notes.txt" })] },
        { content: "Done." },
      ],
    };
    const { task, git } = writeScriptedTask(directory.path, { script, task: { verify: { command: "grep -q three notes.txt", timeout_sec: 30 } } });
    await using server = await fakeServer(directory.path, { exec: fakeShell(gates) });
    const listening = await listen(server.app, "127.0.0.1", 0);
    try {
      const board = await openPage(listening.url, "/");
      await board.waitForSelector("#connection[data-state='live']");
      const id = await board.evaluate(async (taskFile) => {
        const response = await fetch("/v1/runs", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ task_file: taskFile }),
        });
        return ((await response.json()) as { id: string }).id;
      }, task);

      const approval = board.locator("article.approval");
      await approval.waitFor();
      expect(await approval.locator("pre.subject").textContent()).toBe("git push origin main");
      expect(await approval.locator(".rule").textContent()).toContain("git-push");
      await board.keyboard.press("a");
      await board.getByText("Nothing waits for you.").waitFor();

      const first = await openPage(listening.url, `/runs/${id}`);
      const second = await openPage(listening.url, `/runs/${id}`);
      for (const page of [first, second]) await page.locator("details.tool summary", { hasText: "wait-for cut" }).waitFor();
      // Every state the header's connection badge takes from here on (each mutation's old value, then the last).
      for (const page of [first, second]) await page.evaluate(RECORD_CONNECTION_STATES);
      // Cut every connection (the pages' SSE streams included); the server keeps listening.
      listening.dropConnections();
      gates.open("cut");
      for (const page of [first, second]) await page.locator("li[data-type='run.finished']").waitFor({ timeout: 30_000 });
      // The lost connection was shown, never a silent stale page: live → reconnecting… → live → ended.
      for (const page of [first, second]) {
        const states = await page.evaluate<string[]>("globalThis.connectionStates()");
        expect(states[0]).toBe("live");
        expect(states.indexOf("reconnecting…")).toBeGreaterThan(0);
        expect(states.slice(states.indexOf("reconnecting…"))).toContain("live");
        expect(states.at(-1)).toBe("ended");
      }

      const lines = eventsFile(join(server.home, "runs", id));
      for (const page of [first, second]) {
        const sequences = await renderedSequences(page);
        expect(new Set(sequences).size).toBe(sequences.length);
        expect(sequences.sort((a, b) => a - b)).toEqual(lines.map((_line, index) => index));
        expect(await page.locator(".verify .status").textContent()).toBe("passed");
      }

      const diff = await openPage(listening.url, `/runs/${id}/diff`);
      await diff.locator(".d2h-file-wrapper").first().waitFor();
      await diff.getByRole("button", { name: "Merge" }).click();
      await diff.locator(".merge-result .ok").waitFor();
      const report = (await (await server.request(`/v1/runs/${id}`)).json()) as { report: { head_commit: string } };
      expect(git("rev-parse", "main").trim()).toBe(report.report.head_commit);
    } finally {
      await listening.close();
    }
  }, 120_000);

  it("hostile text in tool output, file names and model text is shown, never run", async () => {
    await using directory = temporaryDirectory();
    const hostileName = `<img src=x onerror="window.pwned='name'">.txt`;
    const script = {
      turns: [
        { tool_calls: [toolCall("write_file", { path: hostileName, content: "<script>window.pwned='content'</script>\u001b[31mred\u001b[0m\n" })] },
        { content: "<script>window.pwned='model'</script><img src=x onerror=\"window.pwned='model-img'\"> \u001b]0;title\u0007" },
      ],
    };
    const { task } = writeScriptedTask(directory.path, { script });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const listening = await listen(server.app, "127.0.0.1", 0);
    try {
      const started = await server.request("/v1/runs", { method: "POST", json: { task_file: task } });
      const { id } = (await started.json()) as { id: string };
      const page = await openPage(listening.url, `/runs/${id}`);
      await page.locator("li[data-type='run.finished']").waitFor({ timeout: 30_000 });
      await page.locator("details.tool").first().click();
      expect(await page.locator("main").textContent()).toContain("<script>window.pwned='model'</script>");
      expect(await page.locator("main").textContent()).toContain(hostileName);
      const diff = await openPage(listening.url, `/runs/${id}/diff`);
      await diff.locator(".d2h-file-wrapper").first().waitFor();
      expect(await diff.locator("main").textContent()).toContain("<script>window.pwned='content'</script>");
      for (const view of [page, diff]) {
        expect(await view.evaluate(() => (globalThis as { pwned?: string }).pwned)).toBeUndefined();
        expect(await view.locator("main script, main img, main iframe").count()).toBe(0);
      }
      // Static assets and the stream need the token too.
      for (const path of ["/assets/app.js", "/assets/vendor/diff2html.min.js", `/v1/runs/${id}/events`, `/runs/${id}`])
        expect((await fetch(`${listening.url}${path}`)).status, path).toBe(401);
    } finally {
      await listening.close();
    }
  }, 120_000);

  it("an agency's confirm questions wait in the inbox with their agency, agent and invocation, answered from the keyboard", async () => {
    await using directory = temporaryDirectory();
    const agent = (name: string) => ({
      triggers: ["task.ready"],
      capabilities: ["read_file", "run_shell"],
      turns: [{ tool_calls: [toolCall("run_shell", { command: `echo ${name} >> ${name}.txt` })] }, { content: "done" }],
    });
    writeAgency(directory.path, {
      agents: { alpha: agent("alpha"), beta: agent("beta") },
      agency: { confirm: ["run_shell"], goal: "never.happens" },
    });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const listening = await listen(server.app, "127.0.0.1", 0);
    try {
      const board = await openPage(listening.url, "/");
      await board.waitForSelector("#connection[data-state='live']");
      const id = await board.evaluate(async () => {
        const response = await fetch("/v1/agencies", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ agency_file: "agency.yaml" }),
        });
        return ((await response.json()) as { id: string }).id;
      });

      // Both invocations' questions wait at once; the selected one is answered by its key, then the other.
      await board.locator("article.approval").nth(1).waitFor();
      const answered: Record<string, string> = {};
      for (const key of ["a", "d"]) {
        const selected = board.locator("article.approval.selected");
        const name = (await selected.locator(".agency strong").textContent())!;
        expect(await selected.locator(".agency").textContent()).toMatch(new RegExp(`^ · agency ${id} · agent ${name} \\(${name}-[0-9a-f]{12}\\)$`));
        expect(await selected.locator("pre.subject").textContent()).toBe(`echo ${name} >> ${name}.txt`);
        expect(await selected.locator(".rule").textContent()).toBe("tools.confirm[0]");
        await board.keyboard.press(key);
        answered[name] = key;
        if (key === "a") await board.locator("article.approval").nth(1).waitFor({ state: "detached" });
      }
      await board.getByText("Nothing waits for you.").waitFor();
      expect(Object.keys(answered).sort()).toEqual(["alpha", "beta"]);

      await allSse((await server.request(`/v1/agencies/${id}/events`)).body!);
      const commands = server.provider.commands.map((command) => command.request.command);
      for (const [name, key] of Object.entries(answered)) expect(commands.includes(`echo ${name} >> ${name}.txt`), name).toBe(key === "a");
    } finally {
      await listening.close();
    }
  }, 120_000);

  it("a 50 000-event run keeps the DOM bounded and the JS heap flat while the page follows it", async () => {
    await using directory = temporaryDirectory();
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const run = syntheticRun(server.home, "20261201-120000-big0", "long-transcript", directory.path);
    run.append([
      envelopeLine(run.id, 0, "run.started", {
        run_id: run.id,
        task: "long-transcript",
        workspace: "/repo",
        branch: `runner/${run.id}`,
        base_commit: "0".repeat(40),
      }),
    ]);
    const listening = await listen(server.app, "127.0.0.1", 0);
    try {
      const page = await openPage(listening.url, `/runs/${run.id}`);
      // A 50 000-event run: the first render waits for the page's first window of events (slow on a loaded machine).
      await page.waitForSelector("#connection[data-state='live']", { timeout: 120_000 });
      const cdp = await page.context().newCDPSession(page);
      await cdp.send("Performance.enable");
      const heap = async () => {
        await cdp.send("HeapProfiler.collectGarbage");
        const { metrics } = await cdp.send("Performance.getMetrics");
        return metrics.find((metric) => metric.name === "JSHeapUsedSize")!.value;
      };
      let next = 1;
      const measured: { events: number; heap: number; nodes: number }[] = [];
      for (let chunk = 0; chunk < 5; chunk++) {
        const lines: string[] = [];
        while (lines.length < 10_000) {
          lines.push(...stepLines(run.id, next, next / 4));
          next += 4;
        }
        run.append(lines);
        await page.locator(`li[data-sequence='${next - 3}']`).waitFor({ timeout: 60_000 });
        measured.push({ events: next, heap: await heap(), nodes: await page.locator("*").count() });
      }
      console.log(`serve page: ${JSON.stringify(measured)}`);
      const entries = await page.locator("li.entry").count();
      expect(entries).toBeLessThanOrEqual(2000);
      expect(measured.at(-1)!.nodes).toBeLessThan(20_000);
      // Flat: from 10 000 to 50 000 events the heap grows by less than 8 MiB.
      expect(measured.at(-1)!.heap - measured[0]!.heap).toBeLessThan(8 * 1024 * 1024);
      expect(Math.max(...measured.map((point) => point.nodes)) - Math.min(...measured.map((point) => point.nodes))).toBeLessThan(2000);
    } finally {
      await listening.close();
    }
  }, 480_000);
});
