// The API as the page uses it: JSON over fetch (the httpOnly cookie authenticates), and SSE streams that
// reconnect with a bounded connect timeout and jittered exponential backoff, resuming after the last
// event id (so nothing is lost or shown twice), and say so in the header's connection badge.

const CONNECT_TIMEOUT_MS = 10_000;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 15_000;

/** JSON of an API route; throws an Error with the problem's detail on a non-2xx answer. */
export async function api(path, options = {}) {
  const response = await fetch(path, {
    method: options.method ?? "GET",
    headers: options.body === undefined ? {} : { "content-type": "application/json" },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    credentials: "same-origin",
  });
  const type = response.headers.get("content-type") ?? "";
  const body = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    const error = new Error(typeof body === "object" ? `${body.title}: ${body.detail}` : `${response.status}`);
    error.status = response.status;
    error.problem = body;
    throw error;
  }
  return body;
}

const badge = () => document.getElementById("connection");

/** Shows the connection's state in the header: `live`, `reconnecting…` (and why), `ended`. */
export function showConnection(state, detail = "") {
  const element = badge();
  if (!element) return;
  element.dataset.state = state;
  element.textContent = detail ? `${state} — ${detail}` : state;
}

/**
 * Follows an SSE stream: `url(from)` gives the address to (re)connect to, starting at sequence `from`
 * (null: the stream's own start). `onEvent(event, sequence)` gets each message (`sequence` from its
 * `id:`, null without one); `types` names the `event:` fields to listen to. The stream ends at
 * `event: end` (the run ended). Returns `{ close() }`.
 */
export function follow(url, types, onEvent, options = {}) {
  let next = options.from ?? null;
  let source = null;
  let attempt = 0;
  let closed = false;
  let timer = null;
  const connect = () => {
    if (closed) return;
    showConnection(attempt === 0 ? "connecting…" : "reconnecting…");
    source = new EventSource(url(next));
    const connectTimeout = setTimeout(() => retry("no answer"), CONNECT_TIMEOUT_MS);
    source.onopen = () => {
      clearTimeout(connectTimeout);
      attempt = 0;
      showConnection("live");
    };
    source.onerror = () => {
      clearTimeout(connectTimeout);
      retry("connection lost");
    };
    for (const type of types) {
      source.addEventListener(type, (message) => {
        const sequence = message.lastEventId === "" ? null : Number(message.lastEventId);
        if (sequence !== null) {
          if (next !== null && sequence < next) return; // already shown before a reconnect
          next = sequence + 1;
        }
        onEvent(message.type, JSON.parse(message.data), sequence);
      });
    }
    source.addEventListener("end", () => {
      clearTimeout(connectTimeout);
      source.close();
      closed = true;
      showConnection("ended", "the run is over");
      options.onEnd?.();
    });
  };
  const retry = (why) => {
    if (closed) return;
    source?.close();
    attempt += 1;
    // Full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter"): many pages do not come back in step.
    const delay = Math.random() * Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt);
    showConnection("reconnecting…", `${why}; retry ${attempt} in ${(delay / 1000).toFixed(1)} s`);
    clearTimeout(timer);
    timer = setTimeout(connect, delay);
    options.onDisconnect?.();
  };
  connect();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      source?.close();
    },
  };
}
