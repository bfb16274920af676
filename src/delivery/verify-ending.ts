import type { VerifyResult } from "./verify-commit.js";

/**
 * How a verification that ran ended, for people: `exit 1`, `timed out after
 * 600 s` (a timed-out command has no exit code of its own), or `the sandbox
 * was lost while it ran`. `timeoutSec` is the limit it ran under (task.yaml
 * `verify.timeout_sec`). A module of its own so that reading a run's record
 * (`runner show`) does not load the verification machinery.
 */
export function verifyEnding(verify: Pick<VerifyResult, "exit_code" | "timed_out" | "sandbox_lost">, timeoutSec: number): string {
  if (verify.sandbox_lost !== null) return "the sandbox was lost while it ran";
  if (verify.timed_out) return `timed out after ${timeoutSec} s`;
  return verify.exit_code === null ? "did not run" : `exit ${verify.exit_code}`;
}
