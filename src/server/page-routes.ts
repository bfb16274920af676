import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Context, Hono } from "hono";
import { cloudEventType, EVENT_CATALOGUE, type RunEventName } from "../events/event-catalogue.js";
import { HttpProblem } from "./problem.js";
import { findRunRecord, type ServerContext } from "./server-context.js";

/** The page's ES modules and stylesheet: files next to this module (copied to dist/ by scripts/copy-assets.mjs), served as they are. */
const ASSETS = join(dirname(fileURLToPath(import.meta.url)), "assets");

/** diff2html's browser bundle and stylesheet, served from its package (vendored by npm, not by hand). */
const DIFF2HTML = dirname(createRequire(import.meta.url).resolve("diff2html/package.json"));
const VENDOR: Record<string, { file: string; type: string }> = {
  "diff2html.min.js": { file: join(DIFF2HTML, "bundles/js/diff2html.min.js"), type: "text/javascript; charset=utf-8" },
  "diff2html.min.css": { file: join(DIFF2HTML, "bundles/css/diff2html.min.css"), type: "text/css; charset=utf-8" },
};

const TYPES: Record<string, string> = { js: "text/javascript; charset=utf-8", css: "text/css; charset=utf-8" };

/**
 * The page (issue 23 "The page"): server-rendered HTML shells, one per view,
 * whose ES modules (`/assets/*.js`, no bundler) fill them from the API and
 * its SSE streams. Every text is escaped: the server escapes what it puts in
 * the HTML ({@link escapeHtml}); the modules write text with `textContent`
 * only. The strict CSP of every answer (src/server/server-app.ts) forbids
 * inline script. Views: `/` runs board and approvals inbox, `/runs/:id` run,
 * `/runs/:id/diff` diff review, `/compare?task=` compare, `/batches` and
 * `/batches/:id`.
 */
export function addPageRoutes(app: Hono, context: ServerContext): void {
  app.get("/", (c) => page(c, "board", "Runs", {}));
  app.get("/runs/:id", (c) => {
    const record = findRunRecord(context, c.req.param("id"));
    // EventSource delivers a named event only to listeners of that name: the page listens to every type of the catalogue.
    const types = Object.keys(EVENT_CATALOGUE).map((name) => cloudEventType(name as RunEventName));
    return page(c, "run", `Run ${record.id}`, { run: record.id, task: record.task, types: JSON.stringify(types) });
  });
  app.get("/runs/:id/diff", (c) => {
    const record = findRunRecord(context, c.req.param("id"));
    return page(c, "diff", `Diff of ${record.id}`, { run: record.id, task: record.task }, true);
  });
  app.get("/compare", (c) => page(c, "compare", `Compare ${c.req.query("task") ?? ""}`, { task: c.req.query("task") ?? "" }, true));
  app.get("/batches", (c) => page(c, "batches", "Batches", {}));
  app.get("/batches/:id", (c) => page(c, "batch", `Batch ${c.req.param("id")}`, { batch: c.req.param("id") }));
  app.get("/assets/vendor/:name", (c) => {
    const vendored = VENDOR[c.req.param("name")];
    if (!vendored) throw notFound(c);
    return c.body(readFileSync(vendored.file), 200, { "content-type": vendored.type, "cache-control": "private, max-age=3600" });
  });
  app.get("/assets/:name", (c) => {
    const name = c.req.param("name");
    const type = TYPES[name.split(".").pop() ?? ""];
    const file = join(ASSETS, name);
    if (!/^[a-z0-9-]+\.(js|css)$/.test(name) || !type || !existsSync(file)) throw notFound(c);
    return c.body(readFileSync(file), 200, { "content-type": type, "cache-control": "no-cache" });
  });
}

function notFound(c: Context): HttpProblem {
  return new HttpProblem(404, "Not found", `no asset ${new URL(c.req.url).pathname}`);
}

/** One view's HTML shell: the navigation, a `<main>` whose data attributes name what to show, and the module that shows it. */
function page(c: Context, view: string, title: string, data: Record<string, string>, diff = false): Response {
  const attributes = Object.entries({ view, ...data })
    .map(([name, value]) => ` data-${name}="${escapeHtml(value)}"`)
    .join("");
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · runner</title>
<link rel="stylesheet" href="/assets/page.css">
${diff ? '<link rel="stylesheet" href="/assets/vendor/diff2html.min.css">\n<script src="/assets/vendor/diff2html.min.js"></script>\n' : ""}<script type="module" src="/assets/app.js"></script>
</head>
<body>
<header class="top">
<a class="brand" href="/">runner</a>
<nav><a href="/"${view === "board" ? ' aria-current="page"' : ""}>Runs</a><a href="/batches"${view.startsWith("batch") ? ' aria-current="page"' : ""}>Batches</a></nav>
<span id="connection" class="connection" role="status" aria-live="polite"${view === "board" || view === "run" ? "" : " hidden"}>connecting…</span>
</header>
<main id="view"${attributes}>
<h1>${escapeHtml(title)}</h1>
<noscript>This page needs JavaScript (ES modules); the API at /v1 works without it.</noscript>
</main>
</body>
</html>
`;
  return c.html(html);
}

/** Text for HTML text and attribute values: `& < > " '` as entities. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}
