/**
 * Helpers for the `runner serve` tests: a server app over a fake-tier Runner,
 * and a reader of Server-Sent Events that counts what arrived.
 */
import type { Hono } from "hono";
import type { Ceilings } from "../../src/runner/operator-ceilings.js";
import { createServerApp, type ServerApp } from "../../src/server/server-app.js";
import { fakeAgencyRunner } from "./agency-fixture.js";
import type { HostDirectorySandboxOptions } from "../../src/sandbox/fake/host-directory-sandbox.js";

export const TOKEN = "test-token-0123456789";

/** A server app on a fake-tier Runner (HostDirectorySandboxProvider, scripted model) whose tasks root is `root`. */
export async function fakeServer(root: string, options: HostDirectorySandboxOptions & { approvalTimeoutMs?: number; ceilings?: Ceilings } = {}) {
  const fake = await fakeAgencyRunner(options);
  const server: ServerApp = createServerApp({
    runner: fake.runner,
    token: TOKEN,
    tasksRoots: [root],
    ...(options.approvalTimeoutMs ? { approvalTimeoutMs: options.approvalTimeoutMs } : {}),
    ...(options.ceilings ? { ceilings: options.ceilings } : {}),
  });
  const request = (path: string, init: RequestInit & { json?: unknown } = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has("authorization")) headers.set("authorization", `Bearer ${TOKEN}`);
    if (init.json !== undefined) headers.set("content-type", "application/json");
    return server.app.request(path, { ...init, headers, ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}) });
  };
  return {
    ...fake,
    app: server.app as Hono,
    server,
    request,
    async [Symbol.asyncDispose]() {
      await server.close();
      await fake[Symbol.asyncDispose]();
    },
  };
}

/** One Server-Sent Event as read off the wire. */
export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/**
 * Reads SSE messages from `body` and calls `onEvent` for each; resolves when
 * the stream ends or `onEvent` returns true (then cancels the stream).
 */
export async function readSse(body: ReadableStream<Uint8Array>, onEvent: (event: SseEvent) => boolean | void): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event: SseEvent = { id: null, event: "message", data: "" };
      let hasData = false;
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") event.id = text;
        else if (field === "event") event.event = text;
        else if (field === "data") {
          event.data += (hasData ? "\n" : "") + text;
          hasData = true;
        }
      }
      if (!hasData) continue;
      if (onEvent(event) === true) {
        await reader.cancel();
        return;
      }
    }
  }
}

/** Every event of a stream until it ends. */
export async function allSse(body: ReadableStream<Uint8Array>): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  await readSse(body, (event) => void events.push(event));
  return events;
}
