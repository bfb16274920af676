// Diff review (issue 23 view 3): the run's verified patch as a file list with inline or side-by-side
// view (diff2html, which escapes the diff's text and file names), Merge (the verified fast-forward) and
// a download of patch.diff.
import { api } from "./api.js";
import { h, replace } from "./dom.js";

export function show(main) {
  const runId = main.dataset.run;
  const summary = h("div", { class: "diff-summary" });
  const result = h("div", { class: "merge-result", role: "status" });
  const view = h("div", { class: "diff-view" });
  let format = localStorage.getItem("diff-format") === "side-by-side" ? "side-by-side" : "line-by-line";
  let patch = "";
  const formatButton = h("button", { type: "button", onclick: () => toggle() }, "");
  const merge = h("button", { type: "button", class: "allow", disabled: true, onclick: () => doMerge() }, "Merge");
  replace(
    main,
    h("h1", {}, "Diff of ", main.dataset.task, " ", h("span", { class: "muted mono" }, runId)),
    h(
      "nav",
      { class: "subnav" },
      h("a", { href: `/runs/${encodeURIComponent(runId)}` }, "Run"),
      h("a", { href: `/v1/runs/${encodeURIComponent(runId)}/patch`, download: `${runId}.diff` }, "Download patch"),
    ),
    summary,
    h("div", { class: "toolbar" }, merge, formatButton),
    result,
    view,
  );

  const render = () => {
    formatButton.textContent = format === "line-by-line" ? "Side by side" : "Inline";
    if (!patch.trim()) return replace(view, h("p", { class: "muted" }, "The run changed nothing."));
    // diff2html builds its HTML from the diff with every text escaped (its templates escape file names and lines).
    view.innerHTML = window.Diff2Html.html(patch, { drawFileList: true, matching: "lines", outputFormat: format, diffMaxChanges: 20000 });
  };
  const toggle = () => {
    format = format === "line-by-line" ? "side-by-side" : "line-by-line";
    localStorage.setItem("diff-format", format);
    render();
  };
  const doMerge = async () => {
    merge.disabled = true;
    try {
      const outcome = await api(`/v1/runs/${encodeURIComponent(runId)}/merge`, { method: "POST" });
      replace(result, h("p", { class: "ok" }, outcome.detail));
    } catch (error) {
      replace(result, h("p", { class: "error" }, error.problem?.detail ?? error.message));
      merge.disabled = false;
    }
  };

  (async () => {
    const record = await api(`/v1/runs/${encodeURIComponent(runId)}`);
    const report = record.report;
    const verified = record.status === "succeeded" && report?.verify?.passed === true;
    const merged = report?.merge?.merged === true;
    merge.disabled = !verified || merged;
    merge.title = merged ? "already merged" : verified ? "fast-forward your branch to this run's verified commit" : "only a verified run is merged";
    replace(
      summary,
      h("span", { class: `status ${record.status}` }, verified ? "verified" : record.status),
      report ? (report.reason !== "verified" ? ` ${report.reason}` : "") : " (running)",
      report?.verify ? h("span", { class: "muted" }, " · verify ", h("code", {}, report.verify.command), ` exit ${report.verify.exit_code ?? "–"}`) : null,
      merged ? h("span", { class: "ok" }, ` · merged: ${report.merge.detail}`) : null,
    );
    try {
      patch = await api(`/v1/runs/${encodeURIComponent(runId)}/patch`);
    } catch (error) {
      return replace(view, h("p", { class: "muted" }, error.problem?.detail ?? error.message));
    }
    render();
  })().catch((error) => replace(view, h("p", { class: "error" }, error.message)));
}
