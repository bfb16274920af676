// Runs board and approvals inbox (issue 23 view 1): one SSE stream (/v1/events) of run-level changes;
// a snapshot on every (re)connect, so a reconnect never leaves the board stale.
import { api, follow } from "./api.js";
import { h, replace, time, usd } from "./dom.js";

const FILTERS = {
  all: () => true,
  "needs me": (run) => run.pending_approvals > 0,
  running: (run) => run.status === "running",
  verified: (run) => run.status === "succeeded" && run.report?.verify?.passed === true,
  failed: (run) => ["failed", "error", "cancelled", "unfinished"].includes(run.status),
};

export function show(main) {
  const runs = new Map();
  const approvals = new Map();
  let filter = new URLSearchParams(location.search).get("filter") ?? "all";
  if (!FILTERS[filter]) filter = "all";
  let selected = 0;

  const inbox = h("section", { class: "inbox", "aria-label": "Approvals" });
  const filters = h("div", { class: "filters", role: "toolbar", "aria-label": "Filter runs" });
  const table = h("table", { class: "runs" });
  replace(main, h("h1", {}, "Runs"), inbox, filters, table);

  const renderFilters = () =>
    replace(
      filters,
      Object.keys(FILTERS).map((name) =>
        h(
          "button",
          {
            type: "button",
            class: name === filter ? "filter active" : "filter",
            "aria-pressed": name === filter ? "true" : "false",
            onclick: () => {
              filter = name;
              history.replaceState(null, "", name === "all" ? "/" : `/?filter=${encodeURIComponent(name)}`);
              render();
            },
          },
          name,
          name === "needs me" ? ` (${[...runs.values()].filter(FILTERS[name]).length})` : "",
        ),
      ),
    );

  const renderRuns = () => {
    const rows = [...runs.values()].filter(FILTERS[filter]).sort((a, b) => (a.id < b.id ? 1 : -1));
    replace(
      table,
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Task", "Status", "Step", "Cost", "Approvals", "Started", ""].map((label) => h("th", { scope: "col" }, label)),
        ),
      ),
      h(
        "tbody",
        {},
        rows.length === 0
          ? h("tr", {}, h("td", { colspan: 7, class: "empty" }, filter === "all" ? "No runs yet. Start one with POST /v1/runs." : `No ${filter} runs.`))
          : null,
        rows.map((run) =>
          h(
            "tr",
            { dataset: { run: run.id } },
            h("td", {}, h("a", { href: `/runs/${encodeURIComponent(run.id)}` }, run.task), h("div", { class: "muted mono" }, run.id)),
            h("td", {}, h("span", { class: `status ${run.status}` }, statusLabel(run))),
            h("td", { class: "number" }, run.steps ?? "–"),
            h("td", { class: "number" }, usd(run.cost_usd)),
            h("td", { class: "number" }, run.pending_approvals ? h("span", { class: "pending" }, String(run.pending_approvals)) : "–"),
            h("td", {}, time(run.started_at)),
            h(
              "td",
              { class: "links" },
              run.report?.patch ? h("a", { href: `/runs/${encodeURIComponent(run.id)}/diff` }, "diff") : null,
              " ",
              h("a", { href: `/compare?task=${encodeURIComponent(run.task)}` }, "compare"),
            ),
          ),
        ),
      ),
    );
  };

  const answer = async (approval, decision) => {
    const row = inbox.querySelector(`[data-approval="${CSS.escape(approval.id)}"]`);
    row?.classList.add("answering");
    try {
      await api(`/v1/runs/${encodeURIComponent(approval.run_id)}/approvals/${encodeURIComponent(approval.id)}`, { method: "POST", body: { decision } });
      approvals.delete(approval.id);
    } catch (error) {
      row?.classList.remove("answering");
      row?.append(h("div", { class: "error" }, error.message));
      return;
    }
    render();
  };

  const renderInbox = () => {
    const pending = [...approvals.values()].sort((a, b) => (a.asked_at < b.asked_at ? -1 : 1));
    selected = Math.min(selected, Math.max(0, pending.length - 1));
    replace(
      inbox,
      h("h2", {}, `Approvals waiting (${pending.length})`),
      pending.length === 0
        ? h("p", { class: "muted" }, "Nothing waits for you.")
        : h("p", { class: "muted keys" }, "Keys: j/k select · a allow · s always for this run · d deny"),
      pending.map((approval, index) =>
        h(
          "article",
          { class: index === selected ? "approval selected" : "approval", dataset: { approval: approval.id }, tabindex: "-1" },
          h(
            "header",
            {},
            h("strong", {}, approval.tool),
            " in ",
            h("a", { href: `/runs/${encodeURIComponent(approval.run_id)}` }, runs.get(approval.run_id)?.task ?? approval.run_id),
            approval.agency
              ? h(
                  "span",
                  { class: "agency" },
                  ` · agency ${approval.agency.id} · agent `,
                  h("strong", {}, approval.agency.agent),
                  ` (${approval.agency.invocation_id})`,
                )
              : null,
            // An agency invocation's own agent is its run's "main": named above already; a subagent is still shown.
            h(
              "span",
              { class: "muted" },
              `${approval.agency && approval.agent_id === "main" ? "" : ` · ${approval.agent_id}`} · answer by ${time(approval.deadline)}`,
            ),
          ),
          approval.subject ? h("pre", { class: "subject" }, approval.subject) : null,
          h("p", {}, h("span", { class: "rule" }, approval.rule), " ", approval.reason),
          h(
            "div",
            { class: "actions" },
            h("button", { type: "button", class: "allow", onclick: () => answer(approval, "allow") }, "Allow"),
            approval.can_remember ? h("button", { type: "button", onclick: () => answer(approval, "allow_always") }, "Always for this run") : null,
            h("button", { type: "button", class: "deny", onclick: () => answer(approval, "deny") }, "Deny"),
          ),
        ),
      ),
    );
  };

  const render = () => {
    renderFilters();
    renderInbox();
    renderRuns();
  };

  document.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLInputElement || event.target instanceof HTMLTextAreaElement || event.ctrlKey || event.metaKey || event.altKey) return;
    const pending = [...approvals.values()].sort((a, b) => (a.asked_at < b.asked_at ? -1 : 1));
    const current = pending[selected];
    if (event.key === "j" || event.key === "ArrowDown") selected = Math.min(selected + 1, pending.length - 1);
    else if (event.key === "k" || event.key === "ArrowUp") selected = Math.max(selected - 1, 0);
    else if (current && event.key === "a") return void answer(current, "allow");
    else if (current && event.key === "s" && current.can_remember) return void answer(current, "allow_always");
    else if (current && event.key === "d") return void answer(current, "deny");
    else return;
    event.preventDefault();
    renderInbox();
  });

  follow(
    () => "/v1/events",
    ["snapshot", "run", "approval.requested", "approval.resolved"],
    (type, data) => {
      if (type === "snapshot") {
        runs.clear();
        approvals.clear();
        for (const run of data.runs) runs.set(run.id, run);
        for (const approval of data.approvals) approvals.set(approval.id, approval);
      } else if (type === "run") runs.set(data.id, data);
      else if (type === "approval.requested") approvals.set(data.id, data);
      else if (type === "approval.resolved") approvals.delete(data.id);
      render();
    },
  );
  render();
}

function statusLabel(run) {
  if (run.status === "succeeded") return run.report?.verify?.passed ? "verified" : "succeeded";
  return run.status;
}
