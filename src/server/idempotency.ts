import { createHash } from "node:crypto";
import { HttpProblem } from "./problem.js";

/** A response to replay: status and JSON body. */
export interface StoredResponse {
  status: number;
  body: unknown;
}

/**
 * `Idempotency-Key` for the POSTs that start something (runs, resumes,
 * batches), after the IETF draft "The Idempotency-Key HTTP Header Field":
 * a retry with the same key and the same request gets the first response
 * again (a concurrent retry waits for it) and starts nothing; the same key
 * with a different request is a 422. Keys live in memory for `ttlMs`
 * (default 24 h), at most `capacity` (default 10 000, oldest dropped): a
 * restarted server forgets them. A request that failed with a problem is
 * not kept, so it can be retried.
 */
export class IdempotencyKeys {
  private readonly entries = new Map<string, { fingerprint: string; at: number; response: Promise<StoredResponse> }>();

  constructor(
    private readonly ttlMs = 24 * 60 * 60 * 1000,
    private readonly capacity = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** `compute`'s response, or the stored one for `key` (scoped by `scope`, e.g. the route) when the same request came before. */
  async run(scope: string, key: string | undefined, request: unknown, compute: () => Promise<StoredResponse>): Promise<StoredResponse> {
    if (key === undefined) return compute();
    if (key.length === 0 || key.length > 255) {
      throw new HttpProblem(400, "Invalid request", "header.idempotency-key: expected 1 to 255 characters (a UUID will do)", {
        errors: [{ field: "header.idempotency-key", message: "expected 1 to 255 characters" }],
      });
    }
    this.expire();
    const id = `${scope} ${key}`;
    const fingerprint = createHash("sha256").update(JSON.stringify(request)).digest("hex");
    const known = this.entries.get(id);
    if (known) {
      if (known.fingerprint !== fingerprint) {
        throw new HttpProblem(422, "Idempotency key reused", `Idempotency-Key ${key} was used for a different request; use a new key for a new request`, {
          errors: [{ field: "header.idempotency-key", message: "used before for a different request" }],
        });
      }
      return known.response;
    }
    const response = compute();
    this.entries.set(id, { fingerprint, at: this.now(), response });
    response.catch(() => this.entries.delete(id));
    while (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
    return response;
  }

  private expire(): void {
    const oldest = this.now() - this.ttlMs;
    for (const [id, entry] of this.entries) {
      if (entry.at >= oldest) break;
      this.entries.delete(id);
    }
  }
}
