// Compare (issue 23 view 4): the runs of one task side by side: outcome, verify, diffstat, cost, steps.
import { api } from "./api.js";
import { h, replace, usd } from "./dom.js";

export function show(main) {
  const task = main.dataset.task;
  const table = h("table", { class: "runs compare" });
  replace(main, h("h1", {}, "Compare runs of ", task || "…"), table);
  (async () => {
    const runs = [];
    let cursor = null;
    do {
      const page = await api(`/v1/runs?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      runs.push(...page.runs.filter((run) => run.task === task));
      cursor = page.next_cursor;
    } while (cursor && runs.length < 50);
    const stats = await Promise.all(
      runs.map((run) => (run.report?.patch ? api(`/v1/runs/${encodeURIComponent(run.id)}/patch`).then(diffstat, () => null) : null)),
    );
    replace(
      table,
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Run", "Outcome", "Verify", "Diff", "Cost", "Steps", "Tool calls"].map((label) => h("th", { scope: "col" }, label)),
        ),
      ),
      h(
        "tbody",
        {},
        runs.length === 0 ? h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No runs of this task.")) : null,
        runs.map((run, index) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: `/runs/${encodeURIComponent(run.id)}` }, run.id)),
            h("td", {}, h("span", { class: `status ${run.status}` }, run.status), run.report ? h("div", { class: "muted" }, run.report.reason) : null),
            h("td", {}, run.report?.verify ? `${run.report.verify.passed ? "passed" : "failed"} (exit ${run.report.verify.exit_code ?? "–"})` : "–"),
            h(
              "td",
              {},
              stats[index]
                ? h(
                    "a",
                    { href: `/runs/${encodeURIComponent(run.id)}/diff` },
                    `${stats[index].files} file(s) `,
                    h("span", { class: "added" }, `+${stats[index].added}`),
                    " ",
                    h("span", { class: "removed" }, `−${stats[index].removed}`),
                  )
                : "–",
            ),
            h("td", { class: "number" }, usd(run.cost_usd)),
            h("td", { class: "number" }, run.steps ?? "–"),
            h("td", { class: "number" }, run.report?.tool_calls ?? "–"),
          ),
        ),
      ),
    );
  })().catch((error) => main.append(h("p", { class: "error" }, error.message)));
}

function diffstat(patch) {
  let files = 0;
  let added = 0;
  let removed = 0;
  for (const line of String(patch).split("\n")) {
    if (line.startsWith("diff --git ")) files++;
    else if (line.startsWith("+") && !line.startsWith("+++")) added++;
    else if (line.startsWith("-") && !line.startsWith("---")) removed++;
  }
  return { files, added, removed };
}
