/**
 * Timing and reporting helpers for the benchmarks: samples in milliseconds
 * (performance.now), median and p90 by nearest rank, a plain-text table, and
 * round-robin interleaving so that background load (other agents' Docker
 * tests on the same machine) hits every variant alike.
 */
import { performance } from "node:perf_hooks";

export interface Row {
  name: string;
  samples: number[];
  /** Name of the row this one is compared with (same section, same run). */
  baseline?: string;
  note?: string;
}

export function median(samples: number[]): number {
  return quantile(samples, 0.5);
}

export function p90(samples: number[]): number {
  return quantile(samples, 0.9);
}

/** Nearest-rank quantile on a sorted copy; NaN for no samples. */
function quantile(samples: number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  if (q === 0.5 && sorted.length % 2 === 0) {
    return (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
  }
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1]!;
}

export async function time(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

/**
 * Runs every variant once per round, `rounds` times (after `warmup` untimed
 * rounds), rotating the starting variant each round. Returns samples by name.
 */
export async function interleave(variants: Record<string, () => Promise<unknown>>, rounds: number, warmup = 2): Promise<Record<string, number[]>> {
  const names = Object.keys(variants);
  const samples: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
  for (let round = -warmup; round < rounds; round += 1) {
    for (let k = 0; k < names.length; k += 1) {
      const name = names[(k + Math.max(round, 0)) % names.length]!;
      const elapsed = await time(variants[name]!);
      if (round >= 0) samples[name]!.push(elapsed);
    }
  }
  return samples;
}

export function fmt(ms: number): string {
  if (!Number.isFinite(ms)) return "-";
  if (ms >= 100) return ms.toFixed(0);
  if (ms >= 10) return ms.toFixed(1);
  if (ms >= 1) return ms.toFixed(2);
  return ms.toFixed(3);
}

function ratioText(row: Row, rows: Row[]): string {
  if (!row.baseline) return "";
  const base = rows.find((candidate) => candidate.name === row.baseline);
  if (!base) return `? (${row.baseline})`;
  const ratio = median(row.samples) / median(base.samples);
  const shown = ratio >= 10 ? ratio.toFixed(0) : ratio >= 1 ? ratio.toFixed(2) : ratio.toFixed(3);
  return `${shown}x ${row.baseline}`;
}

export function printTable(title: string, rows: Row[]): void {
  const header = ["name", "n", "median ms", "p90 ms", "ratio (median) vs baseline"];
  const body = rows.map((row) => [row.name, String(row.samples.length), fmt(median(row.samples)), fmt(p90(row.samples)), ratioText(row, rows)]);
  const widths = header.map((cell, column) => Math.max(cell.length, ...body.map((line) => line[column]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === 0 || column === 4 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
      .join("  ")
      .trimEnd();
  console.log(`\n== ${title}`);
  console.log(line(header));
  console.log(widths.map((width) => "-".repeat(width)).join("  "));
  for (const cells of body) console.log(line(cells));
  for (const row of rows) if (row.note) console.log(`   ${row.name}: ${row.note}`);
}

/** A goal line: PASS/MISS with the measured median. */
export function goal(label: string, samples: number[] | undefined, limitMs: number): string {
  if (!samples || samples.length === 0) return `  ${label} <= ${limitMs} ms p50: not measured`;
  const value = median(samples);
  return `  ${label} <= ${limitMs} ms p50: ${value <= limitMs ? "MET " : "MISS"} (median ${fmt(value)} ms, p90 ${fmt(p90(samples))} ms)`;
}
