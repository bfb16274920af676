import type { z } from "zod";

/** One problem of a YAML file, by field path, in words a user can act on. */
export interface FieldProblem {
  /** Dotted field path, e.g. `sandbox.limits.memory`; empty for the file itself. */
  path: string;
  message: string;
}

/**
 * Turns a zod issue into a {@link FieldProblem}: unknown fields name the
 * documentation to check (`reference`, e.g. `docs/task-yaml.md`) and, given the `schema` the
 * issue came from, the nearest known field of that mapping ("did you
 * mean"); type and enum errors say what was expected and what was found,
 * unions say which shapes would do.
 */
export function describeIssue(issue: z.core.$ZodIssue, reference: string, schema?: z.core.$ZodType): FieldProblem {
  const path = issue.path.map(String).join(".");
  if (issue.code === "unrecognized_keys") {
    const known = schema ? fieldsAt(schema, issue.path) : [];
    const suggestions = issue.keys.flatMap((key) => {
      const near = closestName(key, known);
      return near ? [[key, near] as const] : [];
    });
    const hint =
      issue.keys.length === 1
        ? suggestions.length
          ? ` (did you mean ${suggestions[0]![1]}?)`
          : ""
        : suggestions.length
          ? ` (${suggestions.map(([key, near]) => `${key}: did you mean ${near}?`).join("; ")})`
          : "";
    return {
      path,
      message: `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.join(", ")}${hint} (check the spelling; see ${reference})`,
    };
  }
  if (issue.code === "invalid_type") {
    if (issue.input === undefined) return { path, message: `required: expected ${issue.expected}` };
    return { path, message: `expected ${issue.expected}, got ${describeValue(issue.input)}` };
  }
  if (issue.code === "invalid_value") {
    const near =
      typeof issue.input === "string"
        ? closestName(
            issue.input,
            issue.values.filter((value): value is string => typeof value === "string"),
          )
        : null;
    return {
      path,
      message: `expected one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}, got ${describeValue(issue.input)}${near ? ` (did you mean ${near}?)` : ""}`,
    };
  }
  if (issue.code === "invalid_key") {
    return { path, message: `invalid key ${JSON.stringify(String(issue.input))}: ${issue.issues.map((inner) => inner.message).join("; ")}` };
  }
  if (issue.code === "invalid_union") {
    // e.g. `match: string | list`: a value of neither type.
    const expected = issue.errors.flat().flatMap((nested) => (nested.code === "invalid_type" && nested.path.length === 0 ? [nested.expected] : []));
    if (expected.length === issue.errors.length) {
      const names = expected.map((type) => (type === "object" ? "a mapping" : type === "array" ? "a list" : `a ${type}`));
      return { path, message: `expected ${names.join(" or ")}, got ${describeValue(issue.input)}` };
    }
    return { path, message: [...new Set(issue.errors.flat().map((nested) => nested.message))].join("; or ") };
  }
  return { path, message: issue.message };
}

/** A short description of a YAML value: `a list`, `a mapping`, `number 3`, `string "x"`. */
function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  return `${typeof value} ${JSON.stringify(value)}`;
}

/** Wrappers whose inner schema holds the fields: defaults, optionals, transforms (`pipe`'s input). */
function unwrap(schema: z.core.$ZodType): z.core.$ZodType {
  let current = schema;
  for (let depth = 0; depth < 20; depth += 1) {
    const def = current._zod.def as unknown as { type: string; innerType?: z.core.$ZodType; in?: z.core.$ZodType; getter?: () => z.core.$ZodType };
    if (def.innerType) current = def.innerType;
    else if (def.type === "pipe" && def.in) current = def.in;
    else if (def.type === "lazy" && def.getter) current = def.getter();
    else break;
  }
  return current;
}

/** The field names of the mapping at `path` in `schema` (through records, lists and wrappers); [] when there is none. */
function fieldsAt(schema: z.core.$ZodType, path: readonly PropertyKey[]): string[] {
  let current: z.core.$ZodType | undefined = unwrap(schema);
  for (const segment of path) {
    const def = current._zod.def as unknown as {
      type: string;
      shape?: Record<string, z.core.$ZodType>;
      valueType?: z.core.$ZodType;
      element?: z.core.$ZodType;
    };
    if (def.type === "object") current = def.shape?.[String(segment)];
    else if (def.type === "record") current = def.valueType;
    else if (def.type === "array") current = def.element;
    else current = undefined;
    if (!current) return [];
    current = unwrap(current);
  }
  const def = current._zod.def as unknown as { type: string; shape?: Record<string, z.core.$ZodType> };
  return def.type === "object" && def.shape ? Object.keys(def.shape) : [];
}

/** Most edits between a typo and a suggestion, and the least share of characters they must have in common (commander's `suggestSimilar` rules). */
const MAX_EDITS = 3;
const MIN_SIMILARITY = 0.4;

/**
 * The candidate nearest to `word` by optimal-string-alignment distance
 * (insertions, deletions, substitutions and adjacent transpositions count
 * one edit each), when at most {@link MAX_EDITS} edits apart and more than
 * {@link MIN_SIMILARITY} alike, as commander suggests unknown options; ties
 * go to the earlier candidate. Null when none is near. Written here rather
 * than with a library: commander's own function is not exported, and no
 * edit-distance package is a dependency (12 lines against a new one).
 */
export function closestName(word: string, candidates: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = MAX_EDITS + 1;
  for (const candidate of candidates) {
    if (candidate.length <= 1) continue;
    const distance = editDistance(word, candidate);
    const length = Math.max(word.length, candidate.length);
    if (distance <= MAX_EDITS && (length - distance) / length > MIN_SIMILARITY && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 0; j <= b.length; j += 1) d[0]![j] = j;
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** A YAML parse error (the `yaml` package's) as the problem text: where, what, and the offending line with a caret under the column. */
export function describeYamlError(
  error: { message: string; code?: string; linePos?: [{ line: number; col: number }] | [{ line: number; col: number }, { line: number; col: number }] },
  source: string,
): string {
  const described = yamlErrorText(error, source);
  // `instruction: Fix add(): it is wrong`: the second ": " starts a mapping where YAML allows none; the parser's words do not say why.
  if (error.code !== "BLOCK_AS_IMPLICIT_KEY") return described;
  const line = error.linePos ? (source.split(/\r?\n/)[error.linePos[0].line - 1] ?? "") : "";
  const key = /^\s*(?:- )?([^\s:#][^:#]*?):\s/.exec(line)?.[1] ?? "key";
  return `${described}\n  the value holds ": ", which YAML reads as another key: quote it (${key}: "...") or write it as a block (${key}: |, the text on the lines below, indented)`;
}

function yamlErrorText(
  error: { message: string; linePos?: [{ line: number; col: number }] | [{ line: number; col: number }, { line: number; col: number }] },
  source: string,
): string {
  const what = error.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "");
  const position = error.linePos?.[0];
  if (!position) return `YAML syntax: ${what}`;
  const lines = source.split(/\r?\n/);
  // An error at the end of the input (an unclosed quote) is reported past the last line: show the last one with text.
  let line = Math.min(position.line, lines.length);
  while (line > 1 && !lines[line - 1]!.trim()) line -= 1;
  const text = lines[line - 1] ?? "";
  const gutter = String(line).padStart(6);
  const caret = line === position.line ? `\n${" ".repeat(gutter.length)} | ${" ".repeat(Math.max(0, position.col - 1))}^` : "";
  return `YAML syntax, line ${position.line}, column ${position.col}: ${what}\n${gutter} | ${text}${caret}`;
}

/**
 * A parsed YAML document's value, or the problem text when building it fails:
 * the `yaml` package throws a ReferenceError ("Excessive alias count") for a
 * document whose aliases would expand past its limit (an alias bomb), which is
 * the file's fault, not the runner's.
 */
export function yamlDocumentValue(document: { toJS(): unknown }): { value: unknown } | { problem: string } {
  try {
    return { value: document.toJS() ?? {} };
  } catch (error) {
    if (!(error instanceof ReferenceError) && !(error instanceof RangeError)) throw error;
    return { problem: `YAML: ${error.message.split("\n")[0]} (aliases expanding too far?)` };
  }
}
