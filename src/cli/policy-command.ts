import { relative } from "node:path";
import { explainPolicy } from "../policy/explain-policy.js";
import { loadPolicy } from "../policy/load-policy.js";

/**
 * `runner policy check FILE`: validates a policy (a path, or the name of a
 * shipped one) and prints what it allows. A bad policy throws
 * PolicyValidationError (exit 2) listing every problem with its field path.
 */
export function policyCheckCommand(nameOrPath: string, write: (text: string) => void = (text) => process.stdout.write(text)): number {
  const loaded = loadPolicy(nameOrPath);
  const source = loaded.shipped ? `shipped, ${loaded.file}` : relative(process.cwd(), loaded.file) || loaded.file;
  write(explainPolicy(loaded.policy, source));
  write("valid\n");
  return 0;
}
