import type { RecordedUsage } from "./messages.js";
import { PRICE_TABLE, PRICE_TABLE_DATE, type PriceEntry, type Prices } from "./price-table.js";

export type { Prices } from "./price-table.js";

/**
 * How a run's model calls are priced (report.json `pricing`): the model id
 * the prices are for, the prices (USD per million tokens) and where they came
 * from; `prices` null when none apply, and then every cost is null.
 */
export interface Pricing {
  /** The model id priced (`model.name`, or the provider's `*_MODEL` variable); null when none is known. */
  model: string | null;
  prices: Prices | null;
  /** `task`: task.yaml `model.prices`; `table`: the runner's price table (`table_date`); null: unpriced. */
  source: "task" | "table" | null;
  /** The provider page the table's prices were taken from; null for task prices or none. */
  url: string | null;
  /** The day the table's numbers were taken (YYYY-MM-DD); null unless `source` is `table`. */
  table_date: string | null;
  /** Why the run is not priced, in words; null when it is. */
  unpriced: string | null;
}

/**
 * The model id a task's calls go to: `model.name`, else for a real provider
 * the variable it reads (`ANTHROPIC_MODEL` for `anthropic`, `OPENAI_MODEL`
 * otherwise); null when neither is set (a scripted task without a name).
 */
export function configuredModelId(model: { provider: string; name?: string | undefined }, environment: NodeJS.ProcessEnv): string | null {
  if (model.name) return model.name;
  if (model.provider === "scripted") return null;
  return environment[model.provider === "anthropic" ? "ANTHROPIC_MODEL" : "OPENAI_MODEL"] || null;
}

/** A dated snapshot or alias suffix a model id may carry after a table id: `-20250929`, `-2025-04-14`, `@20250929` (Vertex AI), `-latest`. */
const SNAPSHOT_SUFFIX = /^(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8}|-latest)$/;

/**
 * The price-table entry of a model id, or null when the table has none.
 * Matching, case-insensitive: a provider path before the last `/` is dropped
 * (OpenRouter's `anthropic/claude-sonnet-4.5`); Claude ids may spell the
 * version with dots (`claude-sonnet-4.5` is `claude-sonnet-4-5`); then the id
 * must be a table id exactly, or a table id followed by only a dated snapshot
 * or `-latest` ({@link SNAPSHOT_SUFFIX}). Anything else (`gpt-4o-audio`,
 * `claude-sonnet-4-5-thinking`) is unknown: a near miss is never priced as its
 * neighbour, so a cost is right or null.
 */
export function lookupPrices(modelId: string): PriceEntry | null {
  let name = modelId.trim().toLowerCase();
  name = name.slice(name.lastIndexOf("/") + 1);
  if (name.startsWith("claude-")) name = name.replace(/\./g, "-");
  for (const entry of PRICE_TABLE) {
    if (entry.except?.includes(name)) return null;
    for (const id of entry.ids) {
      if (name === id || (name.startsWith(id) && SNAPSHOT_SUFFIX.test(name.slice(id.length)))) return entry;
    }
  }
  return null;
}

/**
 * The pricing of a task's model: `model.prices` when the task gives them
 * (any provider, the scripted model too), else the table's entry for `modelId`
 * (the task's `model.name`, or for a real provider the `*_MODEL` variable it
 * reads), else none. A scripted task without `model.name` or `model.prices`
 * is not priced: it has no model to price as (give `model.name:
 * claude-sonnet-4-5` to price a scripted run as that model).
 */
export function pricingOf(model: { provider: string; prices?: Prices | undefined }, modelId: string | null): Pricing {
  if (model.prices) return { model: modelId, prices: model.prices, source: "task", url: null, table_date: null, unpriced: null };
  if (modelId === null) {
    const why =
      model.provider === "scripted"
        ? "the scripted model has no model to price as: set model.name (e.g. claude-sonnet-4-5) or model.prices"
        : "no model name is known: set model.name or model.prices";
    return { model: null, prices: null, source: null, url: null, table_date: null, unpriced: why };
  }
  const entry = lookupPrices(modelId);
  if (!entry) {
    return {
      model: modelId,
      prices: null,
      source: null,
      url: null,
      table_date: null,
      unpriced: `the price table has no model ${modelId}: set model.prices (USD per million tokens) to price it`,
    };
  }
  return { model: modelId, prices: entry.prices, source: "table", url: entry.source, table_date: PRICE_TABLE_DATE, unpriced: null };
}

/**
 * The cost of `usage` at `prices`, USD: uncached prompt tokens
 * (`prompt_tokens - cached_tokens - cache_write_tokens`, never below 0) at
 * `input`, cache reads at `cached_input`, cache writes at `cache_write`,
 * completion tokens at `output`, each price per million tokens.
 */
export function costOf(usage: RecordedUsage, prices: Prices): number {
  const cacheWrite = usage.cache_write_tokens ?? 0;
  const uncached = Math.max(0, usage.prompt_tokens - usage.cached_tokens - cacheWrite);
  return (
    (uncached * prices.input + usage.cached_tokens * prices.cached_input + cacheWrite * prices.cache_write + usage.completion_tokens * prices.output) /
    1_000_000
  );
}

/** A cost as report.json keeps it: rounded to a millionth of a dollar (float sums of many small costs carry noise below that). */
export function roundUsd(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

/** A cost for people: `$1.23`, `$0.0123`, `$0.000042` (four decimals, six below a cent). */
export function formatUsd(value: number): string {
  return `$${Number(value.toFixed(value < 0.01 ? 6 : 4))}`;
}
