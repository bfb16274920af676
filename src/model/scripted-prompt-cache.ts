import { createHash } from "node:crypto";

/**
 * One block of a prompt in the order the provider reads it (tools, system,
 * then the messages), as the scripted model counts it for caching.
 * `breakpoint` marks a block the request asked to cache up to (Anthropic's
 * `cache_control`); automatic caching (OpenAI) ignores it.
 */
export interface PromptBlock {
  text: string;
  breakpoint?: boolean;
}

/** The scripted model's token count of a text (or of that many characters): 4 characters a token, rounded up (rough on purpose; real counts need the provider's tokenizer). */
export function scriptedTokens(text: string | number): number {
  return Math.ceil((typeof text === "number" ? text : text.length) / 4);
}

/**
 * Shortest prefix, tokens, a provider caches: OpenAI caches prompts of 1024
 * tokens or more ("Prompt caching", platform.openai.com/docs/guides/prompt-caching);
 * Anthropic's minimum is 1024 tokens for Sonnet and Opus models
 * (docs.anthropic.com "Prompt caching", "Cache limitations").
 */
export const MIN_CACHED_PREFIX_TOKENS = 1024;
/** Blocks before a breakpoint Anthropic checks for an earlier write ("about 20 blocks before", same page). */
const BREAKPOINT_LOOKBACK_BLOCKS = 20;
/** OpenAI reports cache hits "in increments of 128 tokens" past the first 1024 (same page). */
const AUTOMATIC_CACHE_INCREMENT_TOKENS = 128;

/** What one request read from and wrote to the cache, tokens; `prompt` is every prompt token. */
export interface CacheUsage {
  prompt: number;
  cached: number;
  cacheWrite: number;
}

/**
 * A provider's prompt cache as the scripted model plays it, so caching is
 * measured offline. A prefix is known by the hash of its blocks.
 * - `automatic` (OpenAI chat and Responses): every prefix of a request is
 *   cached; a request reads the longest prefix an earlier one had, rounded
 *   down to 128-token increments past 1024; nothing is reported as written.
 * - `breakpoints` (Anthropic): only prefixes that end at a marked block are
 *   written; at each breakpoint a request looks back up to 20 blocks for the
 *   longest prefix an earlier request wrote, reads it (`cached`), and writes
 *   (`cacheWrite`) the tokens between that and its last breakpoint. So a
 *   breakpoint moved forward each turn reads the last turn's write.
 * Prefixes under {@link MIN_CACHED_PREFIX_TOKENS} are never cached. No
 * expiry (a scripted run is far shorter than the 5-minute TTL).
 */
export class PromptCache {
  private readonly known = new Set<string>();

  measure(blocks: readonly PromptBlock[], mode: "automatic" | "breakpoints"): CacheUsage {
    let hash = createHash("sha256").digest("hex");
    let tokens = 0;
    const boundaries: { hash: string; tokens: number; breakpoint: boolean }[] = [];
    for (const block of blocks) {
      hash = createHash("sha256").update(hash).update("\u0000").update(block.text).digest("hex");
      tokens += scriptedTokens(block.text);
      boundaries.push({ hash, tokens, breakpoint: block.breakpoint === true });
    }
    const large = (boundary: { tokens: number }) => boundary.tokens >= MIN_CACHED_PREFIX_TOKENS;
    let cached = 0;
    let cacheWrite = 0;
    if (mode === "automatic") {
      for (const boundary of boundaries) if (large(boundary) && this.known.has(boundary.hash)) cached = boundary.tokens;
      if (cached > 0)
        cached =
          MIN_CACHED_PREFIX_TOKENS + Math.floor((cached - MIN_CACHED_PREFIX_TOKENS) / AUTOMATIC_CACHE_INCREMENT_TOKENS) * AUTOMATIC_CACHE_INCREMENT_TOKENS;
      for (const boundary of boundaries) if (large(boundary)) this.known.add(boundary.hash);
    } else {
      const marked = boundaries.flatMap((boundary, index) => (boundary.breakpoint && large(boundary) ? [index] : []));
      for (const index of marked) {
        for (let back = index; back >= 0 && back > index - BREAKPOINT_LOOKBACK_BLOCKS; back -= 1) {
          const boundary = boundaries[back]!;
          if (large(boundary) && this.known.has(boundary.hash)) {
            cached = Math.max(cached, boundary.tokens);
            break;
          }
        }
      }
      const last = marked.at(-1);
      if (last !== undefined && boundaries[last]!.tokens > cached) cacheWrite = boundaries[last]!.tokens - cached;
      for (const index of marked) this.known.add(boundaries[index]!.hash);
    }
    return { prompt: tokens, cached, cacheWrite };
  }
}
