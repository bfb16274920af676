// A run's page (issue 23 view 2): the live transcript, windowed (the DOM holds the last WINDOW entries;
// earlier ones load by cursor from /v1/runs/{id}/event-page), and the verify command, exit and output
// tail always on top. Starts from the last page of the log, then follows the SSE stream from there.
import { api, follow } from "./api.js";
import { eventName, h, replace, usd } from "./dom.js";

/** Transcript entries kept in the DOM while following live (issue 23: "the last ~2 000 events"). */
const WINDOW = 2000;
const PAGE = 500;
const PREVIEW_CHARS = 4000;
/** Events after which the status line is fetched again. */
const BOARD_TYPES = new Set(["model_call.finished", "approval.requested", "approval.resolved", "verify.finished", "run.finished"]);

export function show(main) {
  const runId = main.dataset.run;
  const status = h("div", { class: "run-status" });
  const verify = h("section", { class: "verify", "aria-label": "Verification" }, h("h2", {}, "Verify"), h("p", { class: "muted" }, "Not run yet."));
  const earlier = h("button", { type: "button", class: "earlier", hidden: true }, "Load earlier events");
  const transcript = h("ol", { class: "transcript", "aria-live": "off" });
  const counter = h("p", { class: "muted window-note" });
  const everything = h(
    "label",
    { class: "muted every-event" },
    h("input", { type: "checkbox", onchange: (event) => transcript.classList.toggle("all-events", event.target.checked) }),
    " show every event",
  );
  replace(
    main,
    h("h1", {}, main.dataset.task, " ", h("span", { class: "muted mono" }, runId)),
    h(
      "nav",
      { class: "subnav" },
      h("a", { href: `/runs/${encodeURIComponent(runId)}/diff` }, "Diff review"),
      h("a", { href: `/compare?task=${encodeURIComponent(main.dataset.task)}` }, "Compare runs of this task"),
      h("a", { href: `/v1/runs/${encodeURIComponent(runId)}/report` }, "report.json"),
    ),
    status,
    verify,
    h("div", { class: "transcript-bar" }, earlier, counter, everything),
    transcript,
  );

  /** Rendered entries, oldest first: { sequence, element }. */
  const entries = [];
  const toolCards = new Map();
  let firstShown = 0;
  let received = 0;

  const renderStatus = (record) => {
    replace(
      status,
      h("span", { class: `status ${record.status}` }, record.status),
      record.report ? h("span", {}, ` ${record.report.reason}`) : null,
      h("span", { class: "muted" }, ` · step ${record.steps ?? "–"} · ${usd(record.cost_usd)} · branch `),
      h("code", {}, record.branch),
      record.pending_approvals ? h("a", { class: "pending", href: "/?filter=needs%20me" }, ` ${record.pending_approvals} approval(s) waiting`) : null,
      record.report?.error ? h("pre", { class: "error" }, record.report.error) : null,
    );
  };

  const renderVerify = (result) => {
    if (!result) return;
    const passed = result.passed;
    replace(
      verify,
      h("h2", {}, "Verify ", h("span", { class: `status ${passed ? "succeeded" : "failed"}` }, passed ? "passed" : result.timed_out ? "timed out" : "failed")),
      h("pre", { class: "command" }, "$ ", result.command),
      h("p", {}, `exit ${result.exit_code ?? "–"}`, result.duration_ms ? ` · ${(result.duration_ms / 1000).toFixed(1)} s` : ""),
      result.output_tail ? h("pre", { class: "tail" }, result.output_tail) : h("p", { class: "muted" }, "No output."),
    );
    // A tail is read from its end: the failure is at the bottom.
    const tail = verify.querySelector(".tail");
    if (tail) tail.scrollTop = tail.scrollHeight;
  };

  const entryFor = (envelope, sequence) => {
    const name = eventName(envelope.type);
    const data = envelope.data ?? {};
    const agent = data.agent_id && data.agent_id !== "main" ? h("span", { class: "agent" }, data.agent_id) : null;
    const line = (cls, ...children) => h("li", { class: `entry ${cls}`, dataset: { sequence: String(sequence), type: name } }, agent, children);
    switch (name) {
      case "model_call.finished":
        return data.content
          ? line("model", h("div", { class: "text" }, clip(data.content)), h("div", { class: "meta" }, `step ${data.step} · ${usd(data.cost_usd)}`))
          : line("meta", `step ${data.step}: ${data.tool_calls} tool call(s) · ${usd(data.cost_usd)}`);
      case "tool_call.started": {
        const result = h("pre", { class: "result muted" }, "running…");
        const card = h(
          "details",
          { class: "tool" },
          h("summary", {}, h("strong", {}, data.name), " ", h("code", {}, argumentsSummary(data.arguments))),
          h("pre", { class: "arguments" }, clip(data.arguments)),
          result,
        );
        toolCards.set(data.tool_call_id, { card, result });
        return line("tool-entry", card);
      }
      case "tool_call.finished": {
        const known = toolCards.get(data.tool_call_id);
        if (known) {
          known.result.className = data.is_error ? "result error" : "result";
          known.result.textContent = clip(data.result_preview);
          known.card.classList.toggle("failed", data.is_error);
          known.card.parentElement?.setAttribute("data-result-sequence", String(sequence));
          return null;
        }
        return line(
          "tool-entry",
          h(
            "details",
            { class: data.is_error ? "tool failed" : "tool" },
            h("summary", {}, h("strong", {}, data.name), " result"),
            h("pre", { class: "result" }, clip(data.result_preview)),
          ),
        );
      }
      case "tool_call.denied":
        return line("denied", `denied ${data.name}: `, h("span", { class: "rule" }, data.rule), ` ${data.reason}`);
      case "approval.requested":
        return line("approval", "waiting for approval: ", data.question, " ", answerButtons(runId, data.tool_call_id));
      case "approval.resolved":
        return line("meta", `approval: ${data.answer}${data.timed_out ? " (nobody answered in time)" : ""}${data.reason ? ` — ${data.reason}` : ""}`);
      case "subagent.started":
        return line("subagent", `subagent ${data.agent_id} (${data.mode}) started: ${data.description}`);
      case "subagent.finished":
        return line(
          "subagent",
          `subagent ${data.agent_id} ${data.status} after ${data.steps} steps${data.not_merged_reason ? `: ${data.not_merged_reason}` : ""}`,
        );
      case "verify.started":
        return line("meta", "verify: ", h("code", {}, data.command));
      case "verify.finished":
        if (!data.agent_id || data.agent_id === "main") renderVerify(data);
        return line(data.passed ? "verify-passed" : "verify-failed", `verify ${data.passed ? "passed" : "failed"} (exit ${data.exit_code ?? "–"})`);
      case "model_call.started":
        return line("meta minor", `step ${data.step}: calling the model (${data.messages} messages)`);
      case "run.started":
        return line("meta", "run started on ", h("code", {}, data.branch));
      case "run.finished":
        return line(`finished ${data.status}`, `run ${data.status}${data.error ? `: ${data.error}` : ""}`);
      case "agent.finished":
        return line("meta", `${data.agent_id} finished: ${data.reason}`);
      case "workspace.committed":
        return line("meta", `committed ${String(data.commit).slice(0, 12)}${data.changed ? "" : " (no change)"}`);
      case "workspace.merged":
        return line("meta", data.merged ? data.detail : `not merged: ${data.detail}`);
      default:
        return line("meta minor", name);
    }
  };

  const following = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;

  // Events arriving together are rendered together, once per frame: one layout read, one trim, one scroll.
  let queued = [];
  let scheduled = false;
  const append = (envelope, sequence) => {
    queued.push([envelope, sequence]);
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(flush);
  };
  const flush = () => {
    scheduled = false;
    const batch = queued;
    queued = [];
    if (batch.length) received = Math.max(received, batch.at(-1)[1] + 1);
    const stick = following();
    const fragment = document.createDocumentFragment();
    // Following live, entries the window would drop at once are not built at all (a burst, a long replay).
    const skip = stick ? Math.max(0, batch.length - WINDOW) : 0;
    for (const [envelope, sequence] of batch.slice(skip)) {
      received = Math.max(received, sequence + 1);
      const element = entryFor(envelope, sequence);
      if (!element) continue;
      fragment.append(element);
      entries.push({ sequence, element });
    }
    transcript.append(fragment);
    // Only while following live: reading older entries keeps them until the reader comes back down.
    if (stick) trim();
    updateNotes();
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  };

  const trim = () => {
    while (entries.length > WINDOW) {
      const { element } = entries.shift();
      for (const card of element.querySelectorAll("details.tool")) {
        for (const [id, known] of toolCards) if (known.card === card) toolCards.delete(id);
      }
      element.remove();
      firstShown = entries[0].sequence;
    }
  };

  const updateNotes = () => {
    earlier.hidden = firstShown === 0;
    counter.textContent = firstShown > 0 ? `Showing events from #${firstShown} of ${received} (older ones load on request).` : "";
  };

  earlier.addEventListener("click", async () => {
    earlier.disabled = true;
    try {
      const page = await api(`/v1/runs/${encodeURIComponent(runId)}/event-page?before=${firstShown}&limit=${PAGE}`);
      const fragment = document.createDocumentFragment();
      const added = [];
      for (const { sequence, event } of page.events) {
        const element = entryFor(event, sequence);
        if (element) {
          fragment.append(element);
          added.push({ sequence, element });
        }
      }
      transcript.prepend(fragment);
      entries.unshift(...added);
      firstShown = page.events[0]?.sequence ?? 0;
      updateNotes();
    } finally {
      earlier.disabled = false;
    }
  });

  const start = async () => {
    const record = await api(`/v1/runs/${encodeURIComponent(runId)}`);
    renderStatus(record);
    if (record.report?.verify) renderVerify(record.report.verify);
    const last = await api(`/v1/runs/${encodeURIComponent(runId)}/event-page?limit=${WINDOW}`);
    firstShown = last.events[0]?.sequence ?? 0;
    for (const { sequence, event } of last.events) queued.push([event, sequence]);
    flush();
    window.scrollTo(0, document.body.scrollHeight);
    const refresh = () => api(`/v1/runs/${encodeURIComponent(runId)}`).then(renderStatus, () => undefined);
    follow(
      (from) => `/v1/runs/${encodeURIComponent(runId)}/events?from=${from ?? last.total}`,
      JSON.parse(main.dataset.types),
      (_type, envelope, sequence) => {
        append(envelope, sequence);
        if (BOARD_TYPES.has(eventName(envelope.type))) refresh();
      },
      { from: last.total, onEnd: refresh },
    );
  };
  start().catch((error) => main.append(h("p", { class: "error" }, error.message)));
  return { append, renderStatus };
}

/** Allow / Deny for a question still waiting (looked up by its tool call in /v1/approvals); the inbox link otherwise. */
function answerButtons(runId, toolCallId) {
  const box = h("span", { class: "inline-answer" }, h("a", { href: "/?filter=needs%20me" }, "answer in the inbox"));
  api("/v1/approvals")
    .then(({ approvals }) => {
      const pending = approvals.find((approval) => approval.run_id === runId && approval.tool_call_id === toolCallId);
      if (!pending) return;
      const answer = (decision) =>
        api(`/v1/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(pending.id)}`, { method: "POST", body: { decision } }).then(
          () => replace(box, h("span", { class: "muted" }, `answered: ${decision}`)),
          (error) => box.append(h("span", { class: "error" }, ` ${error.message}`)),
        );
      replace(
        box,
        h("button", { type: "button", class: "allow", onclick: () => answer("allow") }, "Allow"),
        pending.can_remember ? h("button", { type: "button", onclick: () => answer("allow_always") }, "Always for this run") : null,
        h("button", { type: "button", class: "deny", onclick: () => answer("deny") }, "Deny"),
      );
    })
    .catch(() => undefined);
  return box;
}

function clip(text) {
  const value = String(text ?? "");
  return value.length > PREVIEW_CHARS ? `${value.slice(0, PREVIEW_CHARS)}\n… (${value.length - PREVIEW_CHARS} more characters)` : value;
}

function argumentsSummary(text) {
  try {
    const parsed = JSON.parse(text);
    const value = parsed.command ?? parsed.path ?? parsed.pattern ?? parsed.description ?? parsed.name ?? "";
    return String(value).split("\n")[0].slice(0, 160);
  } catch {
    return String(text ?? "").slice(0, 160);
  }
}
