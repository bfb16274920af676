import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { BatchReport } from "../batch/batch-report.js";
import { ConfigError } from "../errors.js";

/** One line of a SWE-bench predictions file (the harness's `--predictions_path` JSONL). */
export interface SweBenchPrediction {
  instance_id: string;
  model_name_or_path: string;
  model_patch: string;
}

/**
 * The predictions of a batch's tasks that `runner import swe-bench` made (an
 * `instance.json` with `source: "swe-bench"` next to task.yaml), in the
 * report's task order. A task's patch is its attempt `attempt`'s last try's
 * patch.diff; the empty string when that run left none (an infrastructure
 * error before any work, or no change). Picking the attempt by its verdict
 * would let the hidden tests choose the prediction, so it is chosen by number.
 * Throws ConfigError when no task of the batch was imported from SWE-bench.
 */
export function sweBenchPredictions(report: BatchReport, modelName: string, attempt = 1): SweBenchPrediction[] {
  const predictions: SweBenchPrediction[] = [];
  for (const task of report.tasks) {
    const marker = join(dirname(task.task_file), "instance.json");
    if (!existsSync(marker)) continue;
    const instance = JSON.parse(readFileSync(marker, "utf8")) as { source?: string; instance_id?: string };
    if (instance.source !== "swe-bench" || typeof instance.instance_id !== "string") continue;
    const tries = task.attempts.filter((run) => run.attempt === attempt);
    const patch = tries.at(-1)?.patch ?? null;
    predictions.push({
      instance_id: instance.instance_id,
      model_name_or_path: modelName,
      model_patch: patch && existsSync(patch) ? readFileSync(patch, "utf8") : "",
    });
  }
  if (predictions.length === 0)
    throw new ConfigError(`batch ${report.batch_id} has no task imported by \`runner import swe-bench\` (no instance.json next to its task files)`);
  return predictions;
}
