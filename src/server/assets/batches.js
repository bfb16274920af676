// Batches (issue 23 view 5): the batch list, and each batch's report.html (self-contained, its own CSP) in a frame.
import { api } from "./api.js";
import { h, replace, time } from "./dom.js";

export function show(main) {
  if (main.dataset.batch) return showBatch(main, main.dataset.batch);
  const table = h("table", { class: "runs" });
  replace(main, h("h1", {}, "Batches"), table);
  api("/v1/batches")
    .then(({ batches }) =>
      replace(
        table,
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Batch", "Status", "Tasks", "Created"].map((label) => h("th", { scope: "col" }, label)),
          ),
        ),
        h(
          "tbody",
          {},
          batches.length === 0 ? h("tr", {}, h("td", { colspan: 4, class: "empty" }, "No batches yet. Start one with POST /v1/batches.")) : null,
          batches.map((batch) =>
            h(
              "tr",
              {},
              h("td", {}, h("a", { href: `/batches/${encodeURIComponent(batch.id)}` }, batch.id)),
              h("td", {}, h("span", { class: `status ${batch.status}` }, batch.status)),
              h("td", { class: "number" }, batch.tasks),
              h("td", {}, batch.created_at ? time(batch.created_at) : "–"),
            ),
          ),
        ),
      ),
    )
    .catch((error) => main.append(h("p", { class: "error" }, error.message)));
}

function showBatch(main, id) {
  const summary = h("div", { class: "diff-summary" });
  replace(main, h("h1", {}, "Batch ", h("span", { class: "mono" }, id)), h("nav", { class: "subnav" }, h("a", { href: "/batches" }, "All batches")), summary);
  api(`/v1/batches/${encodeURIComponent(id)}`)
    .then((batch) => {
      const totals = batch.report?.totals ?? {};
      replace(
        summary,
        h("span", { class: `status ${batch.status}` }, batch.status),
        ` · ${batch.tasks} task(s)`,
        totals.pass_rate !== undefined && totals.pass_rate !== null ? ` · pass rate ${(totals.pass_rate * 100).toFixed(1)}%` : "",
      );
      main.append(h("iframe", { class: "report", src: `/v1/batches/${encodeURIComponent(id)}/report.html`, title: "batch report", sandbox: "allow-scripts" }));
    })
    .catch((error) => main.append(h("p", { class: "error" }, error.problem?.detail ?? error.message)));
}
