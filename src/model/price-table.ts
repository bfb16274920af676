/**
 * Prices of models, USD per million tokens, as data: what report.json
 * `cost_usd` and `model.max_cost_usd` are computed with (README "Cost and
 * budgets"). `model.prices` in task.yaml overrides the table for a task.
 *
 * Taken on 2026-12-01 through the search tool: the providers' pricing pages
 * (the `source` of each entry) where a copy was stored, else public copies of
 * those pages' tables (notes and price maps quoting them, read in 2026-08 to
 * 2026-11). `checked: true` means two copies agreed or the page itself was
 * read; `checked: false` marks a number that could not be confirmed that way,
 * and `note` says what is uncertain. Prices change: a task whose numbers
 * matter sets `model.prices`.
 *
 * The four prices: `input` is an uncached prompt token; `cached_input` a
 * prompt token read from the provider's cache (Anthropic "cache hits and
 * refreshes", OpenAI "cached input", DeepSeek "cache hit"); `cache_write` a
 * prompt token written to the cache (Anthropic's 5-minute write, 1.25× input:
 * the runner's `cache_control` breakpoints use the default 5-minute TTL;
 * providers without a write price bill it as input); `output` a completion
 * token (reasoning tokens included, as the providers bill them).
 *
 * Not covered, so priced as above or not at all: batch discounts (the runner
 * does not batch), long-context surcharges (Anthropic's 1M-context beta above
 * 200K prompt tokens, OpenAI's above 272K for GPT-5.4), regional or priority
 * multipliers, DeepSeek's off-peak discounts.
 */
export interface Prices {
  input: number;
  cached_input: number;
  cache_write: number;
  output: number;
}

export interface PriceEntry {
  /** Model ids this entry prices; each also matches its dated snapshots (see {@link lookupPrices} in ./pricing.ts). */
  ids: readonly string[];
  prices: Prices;
  source: string;
  /** False when a number could not be confirmed on the provider's own page (see `note`). */
  checked: boolean;
  note?: string;
  /** Snapshots of these ids that were billed otherwise: never priced with this entry. */
  except?: readonly string[];
}

/** The date the numbers were taken. */
export const PRICE_TABLE_DATE = "2026-12-01";

const ANTHROPIC = "https://platform.claude.com/docs/en/about-claude/pricing";
const OPENAI = "https://developers.openai.com/api/docs/pricing";
const DEEPSEEK = "https://api-docs.deepseek.com/quick_start/pricing-details-usd";

/** Anthropic's prompt-caching multipliers (same page, "Prompt caching"): 5-minute write 1.25× input, read 0.1× input. */
function anthropic(input: number, output: number): Prices {
  return { input, cached_input: round(input * 0.1), cache_write: round(input * 1.25), output };
}

/** OpenAI bills no cache write: a prompt token is input or cached input. */
function openai(input: number, cachedInput: number, output: number): Prices {
  return { input, cached_input: cachedInput, cache_write: input, output };
}

function round(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

export const PRICE_TABLE: readonly PriceEntry[] = [
  // Claude 4.x: the pricing page's "Model pricing" table.
  { ids: ["claude-opus-4-8", "claude-opus-4-7", "claude-opus-4-6", "claude-opus-4-5"], prices: anthropic(5, 25), source: ANTHROPIC, checked: true },
  { ids: ["claude-opus-4-1", "claude-opus-4-0", "claude-opus-4"], prices: anthropic(15, 75), source: ANTHROPIC, checked: true },
  {
    ids: ["claude-sonnet-4-6", "claude-sonnet-4-5", "claude-sonnet-4-0", "claude-sonnet-4"],
    prices: anthropic(3, 15),
    source: ANTHROPIC,
    checked: true,
    note: "prompts above 200K tokens (1M-context beta) are billed $6 / $22.50 and are priced here at the base rate",
  },
  { ids: ["claude-haiku-4-5"], prices: anthropic(1, 5), source: ANTHROPIC, checked: true },
  // OpenAI: the API pricing page's standard tier.
  { ids: ["gpt-5", "gpt-5.1", "gpt-5-codex", "gpt-5.1-codex"], prices: openai(1.25, 0.125, 10), source: OPENAI, checked: true },
  { ids: ["gpt-5-mini", "gpt-5.1-codex-mini"], prices: openai(0.25, 0.025, 2), source: OPENAI, checked: true },
  { ids: ["gpt-5-nano"], prices: openai(0.05, 0.005, 0.4), source: OPENAI, checked: true },
  { ids: ["gpt-5.2", "gpt-5.2-codex"], prices: openai(1.75, 0.175, 14), source: OPENAI, checked: true },
  { ids: ["gpt-5.5"], prices: openai(5, 0.5, 30), source: OPENAI, checked: true },
  {
    ids: ["gpt-5.4"],
    prices: openai(2.5, 0.25, 15),
    source: OPENAI,
    checked: true,
    note: "standard rate for prompts under 272K tokens; longer prompts cost more and are priced here at this rate",
  },
  { ids: ["gpt-5.4-mini"], prices: openai(0.75, 0.075, 4.5), source: OPENAI, checked: true },
  { ids: ["gpt-5.4-nano"], prices: openai(0.2, 0.02, 1.25), source: OPENAI, checked: true },
  { ids: ["gpt-4.1"], prices: openai(2, 0.5, 8), source: OPENAI, checked: true },
  { ids: ["gpt-4.1-mini"], prices: openai(0.4, 0.1, 1.6), source: OPENAI, checked: true },
  {
    ids: ["gpt-4.1-nano"],
    prices: openai(0.1, 0.025, 0.4),
    source: OPENAI,
    checked: false,
    note: "copies that read the page itself took this row from LiteLLM's price map; older copies agree",
  },
  {
    ids: ["gpt-4o"],
    prices: openai(2.5, 1.25, 10),
    source: OPENAI,
    checked: true,
    note: "the first snapshot, gpt-4o-2024-05-13, was billed $5 / $15 without caching and is left unpriced",
    except: ["gpt-4o-2024-05-13"],
  },
  { ids: ["gpt-4o-mini"], prices: openai(0.15, 0.075, 0.6), source: OPENAI, checked: true },
  { ids: ["o1"], prices: openai(15, 7.5, 60), source: OPENAI, checked: true },
  {
    ids: ["o3"],
    prices: openai(2, 0.5, 8),
    source: OPENAI,
    checked: true,
    note: "older copies show $10 / $2.50 / $40, the price before OpenAI's June 2025 cut",
  },
  {
    ids: ["o3-mini"],
    prices: openai(1.1, 0.55, 4.4),
    source: OPENAI,
    checked: false,
    note: "input and output confirmed; only one copy gives the cached-input rate",
  },
  { ids: ["o4-mini"], prices: openai(1.1, 0.275, 4.4), source: OPENAI, checked: true },
  // DeepSeek (OpenAI-compatible): cache miss is input, cache hit is cached input; no write price.
  {
    ids: ["deepseek-chat"],
    prices: { input: 0.27, cached_input: 0.07, cache_write: 0.27, output: 1.1 },
    source: DEEPSEEK,
    checked: false,
    note: "the stored copy of DeepSeek's page predates its later models and peak/off-peak prices; DeepSeek changes prices often: set model.prices",
  },
  {
    ids: ["deepseek-reasoner"],
    prices: { input: 0.55, cached_input: 0.14, cache_write: 0.55, output: 2.19 },
    source: DEEPSEEK,
    checked: false,
    note: "as deepseek-chat",
  },
];
