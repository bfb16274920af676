/**
 * Most bytes one model reply may have, as received after decompression: the
 * HTTP body of one attempt, streamed or read whole: 64 MiB. A streamed reply
 * carries each token in an event of ~150–300 bytes (JSON framing), so a reply
 * of 128k output tokens with its reasoning is ~40 MB on the wire; past the
 * cap the attempt is given up (`reply_too_large`, not retried) instead of
 * holding an unbounded reply in the runner's memory.
 */
export const MAX_REPLY_BYTES = 64 * 1024 ** 2;

/** Thrown into a reply's body stream once it passes its cap; {@link replyTooLarge} finds it along an error's causes. */
class ReplyTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the reply passed ${maxBytes} bytes, the cap of one model reply`);
    this.name = "ReplyTooLargeError";
  }
}

/**
 * A `fetch` for the providers' SDKs (their `fetch` option) whose response
 * bodies fail with {@link ReplyTooLargeError} past `maxBytes`: one place
 * that counts the bytes of every reply, whichever SDK reads it and however
 * (a stream of events, or `json()` of the whole body). The count is of the
 * body as `fetch` hands it over, so after `Content-Encoding` is undone (a
 * small compressed reply that inflates past the cap fails too).
 */
export function sizeCappedFetch(maxBytes: number = MAX_REPLY_BYTES): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!response.body) return response;
    let received = 0;
    const capped = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          received += chunk.byteLength;
          if (received > maxBytes) controller.error(new ReplyTooLargeError(maxBytes));
          else controller.enqueue(chunk);
        },
      }),
    );
    return new Response(capped, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/**
 * Wraps an OpenAI client's `fetch` so that an error reply's JSON body without
 * an `error` key (FastAPI's and vLLM's `{"detail": "Not Found"}`) reaches the
 * SDK as `{"error": {"message": "<the body>"}}`: openai-node builds its
 * message from `body.error` only (core/error.js `APIError.generate`) and says
 * "status code (no body)" otherwise, losing what the server said. Bodies with
 * an `error` key, non-JSON bodies and successful replies pass untouched. The
 * body read here went through `inner`, so the reply size cap still holds.
 */
export function errorBodyKeepingFetch(inner: typeof fetch): typeof fetch {
  return async (input, init) => {
    const response = await inner(input, init);
    if (response.ok || !/\bjson\b/i.test(response.headers.get("content-type") ?? "")) return response;
    const text = await response.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    const keep = body !== null && typeof body === "object" && !Array.isArray(body) && !("error" in body);
    const headers = new Headers(response.headers);
    headers.delete("content-length");
    headers.delete("content-encoding");
    return new Response(keep ? JSON.stringify({ error: { message: text.trim() } }) : text, {
      status: response.status,
      statusText: response.statusText,
      headers,
    });
  };
}

/** The {@link ReplyTooLargeError} along `error`'s causes, if any. */
export function replyTooLarge(error: unknown): ReplyTooLargeError | null {
  for (let current = error, depth = 0; current instanceof Error && depth < 8; depth += 1) {
    if (current instanceof ReplyTooLargeError) return current;
    current = current.cause;
  }
  return null;
}
