import { CancelledError, ModelError } from "../errors.js";
import { abortableSleep } from "../process/abortable-sleep.js";
import type { ModelRequest, ModelResponse } from "./model-client.js";
import { RATE_LIMIT_WAIT_BUDGET_MS, type RateLimitGate } from "./rate-limit-gate.js";
import { replyTooLarge } from "./reply-size.js";

/** Retries after the first attempt unless the caller says otherwise (task.yaml `model.max_retries` has the same default). */
const DEFAULT_MAX_RETRIES = 4;
/** Per-attempt timeout unless the caller says otherwise: 300 s (task.yaml `model.request_timeout_sec` default). */
export const DEFAULT_TIMEOUT_MS = 300_000;
/**
 * Total time of one model request unless the caller says otherwise: 1800 s
 * (task.yaml `model.request_deadline_sec` default), all attempts, backoff and
 * rate-limit waits included. The per-attempt timeout alone is an idle timeout
 * for a stream, which a server sending empty pieces never lets fire.
 */
const DEFAULT_REQUEST_DEADLINE_MS = 1_800_000;
/**
 * Backoff before retry n (0-based) when the server names no delay:
 * `random() * min(RETRY_MAX_DELAY_MS, RETRY_BASE_DELAY_MS * 2^n)` ("full jitter",
 * AWS Architecture Blog, "Exponential Backoff And Jitter", 2015). Base and cap
 * are openai-node's defaults (`initialRetryDelay = 0.5` s, `maxRetryDelay = 8.0` s
 * in `calculateDefaultRetryTimeoutMillis`, openai 6.x `client.ts`); openai-node
 * itself jitters only the top 25 %.
 */
const RETRY_BASE_DELAY_MS = 500;
const RETRY_MAX_DELAY_MS = 8_000;
/** Longest `retry-after` / `retry-after-ms` we honour, in ms (openai-node also stops trusting the header at 60 s). Longer asks are cut to this. */
export const RETRY_AFTER_CAP_MS = 60_000;

/** Why one attempt failed, and whether another attempt may help. */
export interface AttemptFailure {
  reason: string;
  retryable: boolean;
  /** What went wrong, without the endpoint (the final message adds it). */
  detail: string;
  status?: number;
  /** Delay the server asked for, in ms, already capped. */
  retryAfterMs?: number;
  cause: unknown;
}

export type AttemptOutcome = { response: ModelResponse } | { failure: AttemptFailure };

/** Retry settings every provider's client shares (task.yaml `model.max_retries`, `model.request_timeout_sec`). */
export interface RetryOptions {
  /**
   * Retries after the first attempt (attempts = 1 + maxRetries; default
   * {@link DEFAULT_MAX_RETRIES}). Clients retry by themselves, with the SDK's
   * own retries off, so one policy covers HTTP 408/409/429/5xx (and 529),
   * connection errors, timeouts and replies cut off mid-body or not parsable,
   * which the SDKs would not retry. Backoff: {@link RETRY_BASE_DELAY_MS},
   * doubling, capped at {@link RETRY_MAX_DELAY_MS}, full jitter; a
   * `retry-after-ms` (ms) or `retry-after` (seconds or HTTP date) header wins,
   * up to {@link RETRY_AFTER_CAP_MS}. Never retried: other 4xx (400, 401, 403,
   * 404, 422, ...) and the scripted model's `script_expectation_failed`.
   */
  maxRetries?: number;
  /**
   * Timeout of one attempt in ms (default {@link DEFAULT_TIMEOUT_MS}): for a
   * streamed reply the longest silence (no bytes) before the attempt is given
   * up, so a long reply that keeps streaming is never cut; for a reply read
   * whole, headers and body together. A timed-out attempt is retried.
   */
  timeoutMs?: number;
  /**
   * Total time of the request in ms, all attempts and waits included (default
   * {@link DEFAULT_REQUEST_DEADLINE_MS}): past it the request fails with
   * reason `deadline_exceeded`, not retried.
   */
  deadlineMs?: number;
  /** Most bytes of one reply (an attempt's body), default `MAX_REPLY_BYTES` (64 MiB): the clients' `fetch` is `sizeCappedFetch` (reply-size.ts). */
  maxReplyBytes?: number;
  /** Backoff sleep; must reject (any error) as soon as `signal` aborts. Default: a timer. Injected by tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Uniform [0, 1) source for the backoff jitter; default `Math.random`. */
  random?: () => number;
  /**
   * The endpoint's rate limit shared with other clients (a batch's tasks):
   * a 429 or 529 pauses every request through the gate, and such waits are
   * bounded by {@link RATE_LIMIT_WAIT_BUDGET_MS} in total instead of
   * counting against `maxRetries`. Absent: each call backs off alone.
   */
  gate?: RateLimitGate;
}

/**
 * Runs `attempt` until it returns a response, a failure that is not
 * retryable, or the retries are spent; then throws `ModelError` naming
 * `endpoint` and the reason. Sleeps the backoff (or the server's retry-after)
 * between attempts, telling `request.onRetry` first; throws `CancelledError`
 * when `request.signal` aborts, also mid-sleep. Each attempt gets the request
 * with a signal that also aborts at the request's deadline
 * ({@link RetryOptions.deadlineMs}; then `ModelError` `deadline_exceeded`). A
 * reply past its size cap (a {@link ReplyTooLargeError} among the failure's
 * causes) is `ModelError` `reply_too_large`, not retried.
 */
export async function completeWithRetries(
  request: ModelRequest,
  endpoint: string,
  options: RetryOptions,
  attempt: (attempt: number, request: ModelRequest) => Promise<AttemptOutcome>,
): Promise<ModelResponse> {
  const deadlineMs = options.deadlineMs ?? DEFAULT_REQUEST_DEADLINE_MS;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), deadlineMs);
  const bounded = { ...request, signal: request.signal ? AbortSignal.any([request.signal, deadline.signal]) : deadline.signal };
  try {
    return await attemptsUntilDone(bounded, endpoint, options, attempt);
  } catch (error) {
    if (deadline.signal.aborted && !request.signal?.aborted) {
      throw new ModelError(
        `model endpoint ${endpoint} did not complete the request within its deadline of ${deadlineMs / 1000} s (model.request_deadline_sec: all attempts and waits together)`,
        "deadline_exceeded",
        { cause: error },
      );
    }
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

async function attemptsUntilDone(
  request: ModelRequest,
  endpoint: string,
  options: RetryOptions,
  attempt: (attempt: number, request: ModelRequest) => Promise<AttemptOutcome>,
): Promise<ModelResponse> {
  const attempts = 1 + Math.max(0, Math.floor(options.maxRetries ?? DEFAULT_MAX_RETRIES));
  const sleep = options.sleep ?? abortableSleep;
  const gate = options.gate;
  /** Attempts that were rate-limited under the gate: they do not count against `attempts`. */
  let limited = 0;
  let limitedWaitMs = 0;
  for (let index = 0; ; index += 1) {
    if (request.signal?.aborted) throw new CancelledError();
    const admitted = gate ? await gate.ready(request.signal) : undefined;
    const outcome = await attempt(index, request);
    const failure = "failure" in outcome ? outcome.failure : null;
    const tooLarge = failure && replyTooLarge(failure.cause);
    if (tooLarge) {
      admitted?.(true);
      const mebibytes = Math.round(tooLarge.maxBytes / 1024 ** 2);
      throw new ModelError(
        `model endpoint ${endpoint} replied with more than ${tooLarge.maxBytes} bytes (${mebibytes} MiB, the cap of one model reply): the attempt was given up, not retried`,
        "reply_too_large",
        { cause: tooLarge },
      );
    }
    const rateLimited = failure !== null && (failure.reason === "rate_limited" || failure.reason === "overloaded");
    if (gate && failure && rateLimited) {
      const delayMs = failure.retryAfterMs ?? backoffDelayMs(Math.min(limited, 6), options.random);
      gate.pause(delayMs);
      admitted?.(false);
      limited += 1;
      limitedWaitMs += delayMs;
      if (limitedWaitMs > RATE_LIMIT_WAIT_BUDGET_MS) {
        throw new ModelError(
          `model endpoint ${endpoint} ${failure.detail}; gave up after waiting ${Math.round(limitedWaitMs / 1000)} s on its rate limit (${limited} rate-limited attempts)`,
          failure.reason,
          { cause: failure.cause },
        );
      }
      request.onRetry?.({ attempt: index + 1, delayMs, reason: failure.reason, ...(failure.status === undefined ? {} : { status: failure.status }) });
      continue;
    }
    admitted?.(true);
    if (!failure) return (outcome as { response: ModelResponse }).response;
    const counted = index - limited;
    if (!failure.retryable) {
      const where = counted === 0 ? "" : ` (attempt ${counted + 1} of ${attempts})`;
      throw new ModelError(`model endpoint ${endpoint} ${failure.detail}${where}`, failure.reason, { cause: failure.cause });
    }
    if (counted + 1 >= attempts) {
      throw new ModelError(`model endpoint ${endpoint} ${failure.detail}; gave up after ${attempts} attempt${attempts === 1 ? "" : "s"}`, failure.reason, {
        cause: failure.cause,
      });
    }
    const delayMs = failure.retryAfterMs ?? backoffDelayMs(counted, options.random);
    request.onRetry?.({ attempt: index + 1, delayMs, reason: failure.reason, ...(failure.status === undefined ? {} : { status: failure.status }) });
    try {
      await sleep(delayMs, request.signal);
    } catch (error) {
      if (request.signal?.aborted) throw new CancelledError();
      throw error;
    }
  }
}

/**
 * The abort signal of one attempt: aborts when the caller's signal does, or
 * when the attempt's timer runs out. The timer is a total timeout unless
 * {@link touch} is called, which restarts it: a streaming client touches it on
 * every chunk, making it an idle timeout. A controller per attempt also
 * because the SDKs add an abort listener to the signal they get and never
 * remove it, and their own timeouts stop once headers arrive.
 */
export class AttemptSignal {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout;
  private readonly forwardAbort = () => this.controller.abort();
  /** True once the timer (not the caller) aborted the attempt. */
  timedOut = false;

  constructor(
    private readonly caller: AbortSignal | undefined,
    private readonly timeoutMs: number,
  ) {
    caller?.addEventListener("abort", this.forwardAbort, { once: true });
    if (caller?.aborted) this.controller.abort();
    this.timer = this.start();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Restarts the timer: bytes arrived. */
  touch(): void {
    clearTimeout(this.timer);
    this.timer = this.start();
  }

  /** Stops the timer and forgets the caller's signal; call in `finally`. */
  dispose(): void {
    clearTimeout(this.timer);
    this.caller?.removeEventListener("abort", this.forwardAbort);
  }

  private start(): NodeJS.Timeout {
    return setTimeout(() => {
      this.timedOut = true;
      this.controller.abort();
    }, this.timeoutMs);
  }
}

/** Full-jitter backoff before retry `retryIndex` (0 = first retry), in ms. */
export function backoffDelayMs(retryIndex: number, random: () => number = Math.random): number {
  const ceiling = Math.min(RETRY_MAX_DELAY_MS, RETRY_BASE_DELAY_MS * 2 ** retryIndex);
  return Math.floor(random() * ceiling);
}

/**
 * The delay a response asks for, in ms, capped at {@link RETRY_AFTER_CAP_MS}:
 * `retry-after-ms` (milliseconds, non-standard, sent by OpenAI and Anthropic)
 * first, then `retry-after` (RFC 9110 §10.2.3: delay-seconds or an HTTP date).
 * Undefined when neither is present or parsable.
 */
export function retryAfterMs(headers: Headers | undefined, now: number = Date.now()): number | undefined {
  const milliseconds = Number.parseFloat(headers?.get("retry-after-ms") ?? "");
  if (Number.isFinite(milliseconds) && milliseconds >= 0) return Math.min(milliseconds, RETRY_AFTER_CAP_MS);
  const value = headers?.get("retry-after")?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.min(Number.parseFloat(value) * 1000, RETRY_AFTER_CAP_MS);
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.min(Math.max(0, date - now), RETRY_AFTER_CAP_MS);
}

/** HTTP statuses worth another attempt (openai-node's `shouldRetry` list, minus its `x-should-retry` override; 529 is Anthropic's overloaded). */
export function retryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/** The reason word for an HTTP status. */
export function statusReason(status: number): string {
  if (status === 408) return "timeout";
  if (status === 409) return "conflict";
  if (status === 429) return "rate_limited";
  if (status === 401 || status === 403) return "unauthorized";
  if (status === 404) return "not_found";
  if (status === 529) return "overloaded";
  if (status >= 500) return "server_error";
  return "bad_request";
}

/** `message: cause's message: ...`, the messages along an error's cause chain (undici hides the useful one two levels down). */
export function causeChain(error: unknown): string {
  const parts: string[] = [];
  for (let current = error, depth = 0; current !== undefined && current !== null && depth < 5; depth += 1) {
    parts.push((current instanceof Error ? current.message : String(current)).replace(/\.$/, ""));
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join(": ");
}

/**
 * Why reading a reply's body failed after a 2xx status line, or null for
 * another error: the JSON (or an event's JSON) did not parse, or undici's
 * fetch failed the body stream with a TypeError ("terminated", cause "other
 * side closed") when the connection ended mid-body. Both are retried.
 */
export function bodyReadFailure(error: unknown): AttemptFailure | null {
  if (error instanceof SyntaxError) {
    return { reason: "invalid_response", retryable: true, detail: `replied with a body that is not valid JSON: ${error.message}`, cause: error };
  }
  if (error instanceof TypeError) {
    return { reason: "truncated_response", retryable: true, detail: `reply was cut off mid-body: ${causeChain(error)}`, cause: error };
  }
  return null;
}

/** Characters of a page's title kept in a message. */
const TITLE_CHARACTERS = 80;

/**
 * When `text` is an HTML page (a web server's, a proxy's or a login page,
 * where the API's JSON belongs): its `<title>` (cut to 80 characters), or
 * "untitled"; else null. Never the page itself: pages run to kilobytes of
 * markup that say nothing a person needs in an error line.
 */
export function htmlPageTitle(text: string): string | null {
  if (!/^\s*(<!doctype html|<html[\s>]|<head[\s>]|<body[\s>])/i.test(text)) return null;
  const title = /<title[^>]*>([^<]*)<\/title>/i.exec(text)?.[1]?.replace(/\s+/g, " ").trim();
  return title ? title.slice(0, TITLE_CHARACTERS) : "untitled";
}

/**
 * The failure of a reply that is an HTML page ({@link htmlPageTitle}): no
 * API answers with one, so the address is wrong (`hint` says what to
 * check). Retried only for a 5xx or 429 status (a gateway's error page
 * between us and a real API), since the same address answers the same
 * page; the reason is the status's, or `invalid_response` for a 2xx.
 */
export function htmlReplyFailure(status: number, title: string, hint: string, cause: unknown): AttemptFailure {
  const retryable = status === 429 || status >= 500;
  return {
    reason: status >= 300 ? statusReason(status) : "invalid_response",
    retryable,
    detail: `answered ${status} with an HTML page ("${title}"), not the API's JSON${retryable ? "" : `: ${hint}`}`,
    ...(status >= 300 ? { status } : {}),
    cause,
  };
}

/** What to check when an OpenAI-compatible base URL answers like no API: {@link htmlReplyFailure}'s and a 404's hint. */
export const OPENAI_BASE_URL_HINT = "is model.base_url (or OPENAI_BASE_URL) the API's address? An OpenAI-compatible server's usually ends in /v1";
