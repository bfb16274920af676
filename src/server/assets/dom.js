// Building DOM without HTML strings: every text goes in through textContent (never innerHTML), so hostile
// text from tool output, file names or task names is shown, never parsed.

/** An element: `attributes` as properties/attributes (`on*` functions become listeners), children as nodes or text. */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") element.addEventListener(name.slice(2), value);
    else if (name === "class") element.className = value;
    else if (name === "dataset") Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces the children of `element`. */
export function replace(element, ...children) {
  element.replaceChildren();
  append(element, children);
}

/** USD with cents, or a dash. */
export function usd(value) {
  return typeof value === "number" ? `$${value.toFixed(value < 1 ? 4 : 2)}` : "–";
}

/** A short local time of an ISO date. */
export function time(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : date.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

/** `dev.agent-runner.tool_call.started.v1` → `tool_call.started`. */
export function eventName(type) {
  return String(type)
    .replace(/^dev\.agent-runner\./, "")
    .replace(/\.v\d+$/, "");
}
