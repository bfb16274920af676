/**
 * Checks GitHub Actions workflow files against GitHub's workflow schema with
 * @actions/workflow-parser (GitHub's own parser: the schema ships in the
 * package, no network) and prints `{ "<file>": ["<error>", ...] }` as JSON.
 *
 *   node --import tsx tests/helpers/github-workflow-check.ts a.yml [b.yml ...]
 *
 * A separate process (tests/e2e/ci-recipes.test.ts spawns it): the package
 * imports its JSON schema without the import attribute Node's ESM loader
 * requires, which tsx's loader accepts and vitest's does not.
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { convertWorkflowTemplate, NoOperationTraceWriter, parseWorkflow } from "@actions/workflow-parser";

const results: Record<string, string[]> = {};
for (const file of process.argv.slice(2)) {
  const parsed = parseWorkflow({ name: basename(file), content: readFileSync(file, "utf8") }, new NoOperationTraceWriter());
  const errors = parsed.context.errors.getErrors().map((error) => error.message);
  if (parsed.value) {
    const template = await convertWorkflowTemplate(parsed.context, parsed.value);
    errors.push(...(template.errors ?? []).map((error) => error.Message).filter((message) => !errors.includes(message)));
  }
  results[file] = errors;
}
console.log(JSON.stringify(results));
