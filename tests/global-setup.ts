/**
 * Once per `vitest run`: builds the sandbox helper from its source
 * (scripts/build-helper.sh; fast when unchanged), so every test runs the
 * helper of this checkout, never a stale binary. Fails the run when Go is missing.
 */
import { execFileSync } from "node:child_process";

export default function setup(): void {
  execFileSync("bash", ["scripts/build-helper.sh"], { stdio: ["ignore", "inherit", "inherit"] });
}
