import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { errorMessage } from "../../errors.js";

/** Most schema errors named in one correction turn or one `agency.needs_human` event. */
const MAX_ERRORS = 10;

/**
 * Largest output, bytes of its JSON: half an event's `data` limit (16 KiB,
 * MAX_EVENT_DATA_BYTES), so `agency.invocation.finished` with its other
 * fields always fits. A larger object is a problem the model fixes.
 */
export const MAX_OUTPUT_BYTES = 8192;

/** Longest text of one error, characters (an `enum` of many long values stays readable). */
const MAX_ERROR_CHARACTERS = 300;

let shared: Ajv2020 | undefined;

/**
 * One Ajv instance for every schema, made on first use: JSON Schema 2020-12
 * (the schemas models and providers' structured outputs use; draft-07 schemas
 * without `$schema` mean the same for the usual keywords), every error rather
 * than the first, strict mode off so a schema's annotations of other dialects
 * (`example`, vendor keywords) do not make it invalid, `format` taken as an
 * annotation (checking formats needs ajv-formats; not wanted yet), and no
 * schema kept by its `$id` (two agents may use the same one). Shared because
 * an instance's first compile builds the meta-schema's validator (~0.2 s);
 * later compiles take ~1 ms. Ajv (ajv.js.org) compiles a schema into a
 * validator function; `compile` throws on a schema that is not one.
 */
function ajv(): Ajv2020 {
  shared ??= new Ajv2020({ allErrors: true, strict: false, validateFormats: false, addUsedSchema: false });
  return shared;
}

/**
 * The problems of `schema` as a JSON Schema (Ajv's meta-schema check and its
 * compile), `[]` when it is one. For the agency's load-time check (exit 2
 * naming `agent.output_schema`).
 */
export function outputSchemaProblems(schema: Record<string, unknown>): string[] {
  const instance = ajv();
  if (!instance.validateSchema(schema)) return describeErrors(instance.errors ?? [], "the schema");
  try {
    instance.compile(schema);
    return [];
  } catch (error) {
    return [errorMessage(error)];
  }
}

/** What {@link StructuredOutput.check} finds in a final answer: the object, or why it is not one. */
export type OutputVerdict = { valid: true; output: Record<string, unknown> } | { valid: false; errors: string[] };

/**
 * The structured-output guard of one agent (docs/agency.md "Structured
 * output"): its final answer must be a JSON object satisfying `schema`,
 * given either as the whole answer or as one ```json fenced block in it
 * (prose around the block is allowed; two blocks are ambiguous and refused).
 * Throws Error when `schema` does not compile (the agency's loader checks
 * it first with {@link outputSchemaProblems}).
 */
export class StructuredOutput {
  private readonly validate: ValidateFunction;

  constructor(readonly schema: Record<string, unknown>) {
    this.validate = ajv().compile(schema);
  }

  /** Judges a final answer (already redacted: the record and the next agent see only redacted text). */
  check(answer: string | null): OutputVerdict {
    const parsed = jsonObjectOf(answer ?? "");
    if ("error" in parsed) return { valid: false, errors: [parsed.error] };
    if (!this.validate(parsed.value)) return { valid: false, errors: describeErrors(this.validate.errors ?? [], "the object") };
    const bytes = Buffer.byteLength(JSON.stringify(parsed.value));
    if (bytes > MAX_OUTPUT_BYTES)
      return { valid: false, errors: [`the object is ${bytes} bytes of JSON, over the ${MAX_OUTPUT_BYTES}-byte limit; shorten it`] };
    return { valid: true, output: parsed.value };
  }

  /** {@link check} in RunEmbedding.checkFinalAnswer's shape: the errors, or null when the answer is valid. */
  readonly checkFinalAnswer = (answer: string): string[] | null => {
    const verdict = this.check(answer);
    return verdict.valid ? null : verdict.errors;
  };
}

/** A fenced block marked json (```json … ```), anywhere in the text. */
const JSON_FENCE = /```json[ \t]*\r?\n([\s\S]*?)\r?\n?```/gi;

/** The JSON object an answer gives: the whole (trimmed) text, or its one ```json block. */
function jsonObjectOf(answer: string): { value: Record<string, unknown> } | { error: string } {
  const whole = answer.trim();
  let text = whole;
  if (!whole.startsWith("{") && !whole.startsWith("[")) {
    const blocks = [...whole.matchAll(JSON_FENCE)];
    if (blocks.length === 0) return { error: "the final answer is not a JSON object: give the object as the whole answer, or in one ```json fenced block" };
    if (blocks.length > 1) return { error: `the final answer has ${blocks.length} \`\`\`json blocks; give exactly one` };
    text = blocks[0]![1]!;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { error: `the final answer's JSON does not parse: ${errorMessage(error)}` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return { error: `the final answer is JSON but not an object (it is ${Array.isArray(value) ? "an array" : value === null ? "null" : typeof value})` };
  return { value: value as Record<string, unknown> };
}

/** Ajv's errors as lines a model (or a person) can act on: where, what, and the allowed values of an enum. */
function describeErrors(errors: ErrorObject[], root: string): string[] {
  const lines = errors.slice(0, MAX_ERRORS).map((error) => {
    const where = error.instancePath ? `${root}'s ${error.instancePath}` : root;
    const allowed = error.keyword === "enum" ? `: ${JSON.stringify((error.params as { allowedValues: unknown[] }).allowedValues)}` : "";
    const extra = error.keyword === "additionalProperties" ? ` (${JSON.stringify((error.params as { additionalProperty: string }).additionalProperty)})` : "";
    const line = `${where} ${error.message ?? "is invalid"}${allowed}${extra}`;
    return line.length > MAX_ERROR_CHARACTERS ? `${line.slice(0, MAX_ERROR_CHARACTERS - 1)}…` : line;
  });
  if (errors.length > MAX_ERRORS) lines.push(`and ${errors.length - MAX_ERRORS} more`);
  return lines;
}
