/**
 * Secret redaction for everything a run records: session.json, events.jsonl,
 * report.json, the diagnostic log, the terminal view and commit messages. A
 * {@link Redactor} replaces
 *
 * - **literal secret values** (the credentials the runner reads, the values of the
 *   task's `sandbox.secret_env` variables) with `[REDACTED]`, wherever they
 *   occur and in any letter case (the egress proxy, like any URL parser,
 *   lower-cases host names), also JSON-escaped (once or twice: a JSON string
 *   inside a JSON string, such as tool-call arguments in a log line) and
 *   base64-, hex- or percent-encoded ({@link encodedForms});
 * - **credential shapes** with `[REDACTED:<kind>]`, even when nobody told the
 *   runner about the credential (a tool printed one it found): the rules and
 *   their sources are in {@link CREDENTIAL_RULES} (credential-rules.ts) and the
 *   README's "Secrets in records";
 * - **literal values assigned to secret-like names** (`DB_PASSWORD=…`,
 *   `"client_secret": "…"`, `api_key = "…"`) with `[REDACTED:password]`,
 *   `[REDACTED:secret-assignment]` or `[REDACTED:aws-secret-access-key]`: see
 *   {@link assignmentAt} (secret-assignments.ts) for what counts.
 *
 * The shapes are anchored at word boundaries and ask for lengths real tokens
 * have, so ordinary text (git SHAs, UUIDs, `sha512-` integrity hashes,
 * base64 data, `task-runner`, "a Bearer token", `password = getpass()`) is
 * left alone; tests/unit/redaction.test.ts runs the redactor over this
 * repository's own sources and lock file and asserts it changes nothing.
 *
 * Literal values shorter than {@link MIN_SECRET_LENGTH} characters are ignored
 * (a 3-character "secret" would redact every third word) and reported in
 * {@link Redactor.skipped} so the caller can warn. Overlapping matches (one
 * secret containing or overlapping another, a token inside a literal) are
 * merged into one redacted span, so no fragment of either survives.
 *
 * `redact` works on decoded text. On serialized JSON it still catches literal
 * values (their escaped forms are searched too) and the shapes (a token right
 * after a `\n` escape counts as starting a word), but a value split by other
 * escapes is not: parse the JSON and use {@link Redactor.redactDeep} instead
 * (the logger does).
 *
 * Cost: one case-insensitive scan for the literal values, one scan for the
 * shapes and one for the assignments; see the README for measured numbers.
 */
import { CREDENTIAL_RULES } from "./credential-rules.js";
import { encodedForms } from "./encoded-forms.js";
import { runnerSecrets } from "./runner-secrets.js";
import { assignmentAt, BEFORE_ASSIGNMENT } from "./secret-assignments.js";

/** Literal secret values shorter than this are not redacted (see {@link Redactor.skipped}). */
export const MIN_SECRET_LENGTH = 6;

/** What a literal secret value is replaced with. */
export const REDACTED = "[REDACTED]";

/** A secret value with a name for diagnostics (the variable it came from). */
export interface NamedSecret {
  name: string;
  value: string;
}

export interface RedactorOptions {
  /** Redact the built-in token shapes (default true). */
  patterns?: boolean;
}

interface CompiledRule {
  kind: string;
  /** The rule's group in the combined expression, and its secret part's group (null: the whole match). */
  group: number;
  secretGroup: number | null;
  accept?: (secret: string) => boolean;
}

/**
 * The rules compiled into three searches for where a rule may match, and one
 * sticky expression of all the rules tried there (in list order):
 *
 * - `tokens`: keywords holding `_ . -` (`ghp_`, `sk-`, `SG.`), found by
 *   looking back from that character, and keywords starting with `-`
 *   (`-----BEGIN `); group 1: a keyword starting there, group 2: the keyword
 *   ending at the anchor;
 * - `capitals`: the other keywords starting with a capital letter (`AIza`,
 *   `AKIA`, `Bearer`), and `eyJ`;
 * - `operators`: every `=` and `:` after a keyword ending there (group 1:
 *   `AccountKey=`, `sig=`, `Authorization:`), after a secret-like word
 *   (group 2, the generic assignments), or starting `://` (URLs).
 *
 * Why so: one expression of all the rules, or of all the keywords, tried
 * at every position costs 10-15 ms per MB in V8, which cannot skip ahead when
 * alternatives start with dozens of different characters; anchoring on a
 * few characters rarer than letters and looking back from them, in separate
 * searches (one expression of the three is slower again), keeps the whole
 * redaction near 2x the cost of the six shapes it had before (README).
 */
function compileRules(): { tokens: RegExp; capitals: RegExp; operators: RegExp; rules: RegExp; compiled: CompiledRule[] } {
  const parts: string[] = [];
  const compiled: CompiledRule[] = [];
  const dashes = new Set<string>();
  const anchored = new Set<string>();
  const capitals = new Set<string>();
  const operatorHeads = new Set<string>();
  let group = 1;
  for (const rule of CREDENTIAL_RULES) {
    const inner = new RegExp(`${rule.source}|`).exec("")!.length - 1;
    if (inner > 1) throw new Error(`credential rule ${rule.kind}: at most one capturing group (the secret part), found ${inner}`);
    parts.push(`(${rule.source})`);
    compiled.push({ kind: rule.kind, group, secretGroup: inner === 1 ? group + 1 : null, ...(rule.accept ? { accept: rule.accept } : {}) });
    group += 1 + inner;
    for (const keyword of rule.keywords) {
      const tokenAnchor = firstIndexOf(keyword, "_.-");
      const operatorAnchor = firstIndexOf(keyword, "=:");
      if (keyword.startsWith("-")) dashes.add(escapeRegExp(keyword));
      else if (tokenAnchor > 0) anchored.add(escapeRegExp(keyword.slice(0, tokenAnchor + 1)));
      else if (keyword === "://") continue;
      else if (operatorAnchor > 0) operatorHeads.add(escapeRegExp(keyword.slice(0, operatorAnchor)));
      else if (/^[A-Z]/.test(keyword)) capitals.add(escapeRegExp(keyword));
      else if (keyword.startsWith("eyJ")) capitals.add("eyJ");
      else throw new Error(`credential rule ${rule.kind}: keyword ${keyword} is none of the searchable forms (see CredentialRule.keywords)`);
    }
  }
  return {
    tokens: new RegExp(`(${[...dashes].join("|")})|[_.\\-](?<=(${[...anchored].join("|")}))`, "g"),
    capitals: new RegExp([...capitals].join("|"), "g"),
    operators: new RegExp(`[=:](?:(?<=(${[...operatorHeads].join("|")})[=:])|(?<=${BEFORE_ASSIGNMENT}[=:])|(?<=:)(?=//))`, "gi"),
    rules: new RegExp(parts.join("|"), "y"),
    compiled,
  };
}

/** Index of the first of `characters` in `text` after its first character, or -1. */
function firstIndexOf(text: string, characters: string): number {
  for (let index = 1; index < text.length; index++) if (characters.includes(text[index]!)) return index;
  return -1;
}

const RULES = compileRules();
/** Labels rank after literal values (0) and the rules (1..n): a merged span takes the best. */
const ASSIGNMENT_RANK = CREDENTIAL_RULES.length + 1;

/**
 * A credential may start at `index`: it does not continue a word or a
 * base64url run (a `-` before it), unless that word is the letter of a JSON
 * escape (`\n`).
 */
function startsToken(text: string, index: number): boolean {
  if (index === 0 || !/[A-Za-z0-9]/.test(text[index]!)) return true;
  const before = text[index - 1]!;
  if (!/[A-Za-z0-9_-]/.test(before)) return true;
  return /[nrt]/.test(before) && index >= 2 && text[index - 2] === "\\";
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A span to replace: [start, end) and its priority (lower wins the label). */
interface Span {
  start: number;
  end: number;
  rank: number;
  label: string;
}

function jsonEscaped(value: string): string {
  return JSON.stringify(value).slice(1, -1);
}

export class Redactor {
  /** The distinct forms searched for, longest first. */
  private readonly forms: string[];
  /** The forms as one case-insensitive expression (null without any). */
  private readonly literals: RegExp | null;
  private readonly patterns: boolean;
  /** Names (or `#<index>`) of the non-empty values ignored as shorter than {@link MIN_SECRET_LENGTH}. */
  readonly skipped: readonly string[];

  constructor(secrets: Iterable<string | NamedSecret | null | undefined> = [], options: RedactorOptions = {}) {
    this.patterns = options.patterns ?? true;
    const forms = new Set<string>();
    const skipped: string[] = [];
    let index = 0;
    for (const secret of secrets) {
      const name = typeof secret === "object" && secret !== null ? secret.name : `#${index}`;
      const value = typeof secret === "object" && secret !== null ? secret.value : secret;
      index += 1;
      if (!value) continue;
      const candidates = [value, value.trim()];
      let kept = false;
      for (const candidate of candidates) {
        if (candidate.length < MIN_SECRET_LENGTH) continue;
        kept = true;
        const once = jsonEscaped(candidate);
        forms.add(candidate).add(once).add(jsonEscaped(once));
        for (const encoded of encodedForms(candidate)) if (encoded.length >= MIN_SECRET_LENGTH) forms.add(encoded);
      }
      if (!kept) skipped.push(name);
    }
    this.forms = [...forms].sort((a, b) => b.length - a.length);
    this.literals = this.forms.length ? new RegExp(this.forms.map(escapeRegExp).join("|"), "gi") : null;
    this.skipped = skipped;
  }

  /** True when {@link redact} can never change anything: no literal values and no shapes. */
  get isEmpty(): boolean {
    return this.forms.length === 0 && !this.patterns;
  }

  /** Length of the longest literal form searched for (0 without any): how much of a growing text a secret's start can hide in. */
  get longestLiteral(): number {
    return this.forms[0]?.length ?? 0;
  }

  /** How many literal values (counting their escaped forms) are searched for. */
  get literalCount(): number {
    return this.forms.length;
  }

  /** `text` with every secret value, credential shape and secret assignment replaced. */
  redact(text: string): string {
    if (text.length === 0) return text;
    const spans: Span[] = [];
    if (this.literals) {
      const literals = this.literals;
      literals.lastIndex = 0;
      let match: RegExpExecArray | null;
      while ((match = literals.exec(text)) !== null) {
        spans.push({ start: match.index, end: match.index + match[0].length, rank: 0, label: REDACTED });
        // Overlapping values (one secret's end is another's start) are all found.
        literals.lastIndex = match.index + 1;
      }
    }
    if (this.patterns) {
      const { tokens, capitals, operators } = RULES;
      tokens.lastIndex = 0;
      let candidate: RegExpExecArray | null;
      while ((candidate = tokens.exec(text)) !== null) {
        const end = ruleAt(text, candidate[1] !== undefined ? candidate.index : candidate.index + 1 - candidate[2]!.length, spans);
        // Keywords inside the credential (a `_` of its body) are not looked at again.
        if (end > tokens.lastIndex) tokens.lastIndex = end;
      }
      capitals.lastIndex = 0;
      while ((candidate = capitals.exec(text)) !== null) {
        const end = ruleAt(text, candidate.index, spans);
        if (end > capitals.lastIndex) capitals.lastIndex = end;
      }
      operators.lastIndex = 0;
      while ((candidate = operators.exec(text)) !== null) {
        if (candidate[2] !== undefined) {
          const assignment = assignmentAt(text, candidate.index - candidate[2].length);
          if (assignment) spans.push({ start: assignment.start, end: assignment.end, rank: ASSIGNMENT_RANK, label: `[REDACTED:${assignment.kind}]` });
        } else {
          ruleAt(text, candidate[1] !== undefined ? candidate.index - candidate[1].length : candidate.index, spans);
        }
      }
    }
    return spans.length === 0 ? text : replaceSpans(text, spans);
  }

  /**
   * A copy of `value` with every string redacted: arrays and plain objects are
   * walked, their keys redacted too (report.json counts requests by
   * `host:port`, and a host can hold a secret), other values returned
   * unchanged. Two keys that redact to the same text keep the later value.
   * Errors become plain `{ name, message, stack, ... }` objects so their text
   * is redacted too. Cycles are preserved.
   */
  redactDeep<T>(value: T): T {
    return this.walk(value, new Map()) as T;
  }

  private walk(value: unknown, seen: Map<object, unknown>): unknown {
    if (typeof value === "string") return this.redact(value);
    if (typeof value !== "object" || value === null) return value;
    const known = seen.get(value);
    if (known !== undefined) return known;
    if (Array.isArray(value)) {
      const copy: unknown[] = [];
      seen.set(value, copy);
      for (const item of value) copy.push(this.walk(item, seen));
      return copy;
    }
    const prototype = Object.getPrototypeOf(value) as unknown;
    const isError = value instanceof Error;
    if (prototype !== Object.prototype && prototype !== null && !isError) return value;
    const copy: Record<string, unknown> = {};
    seen.set(value, copy);
    if (isError) {
      copy.name = this.redact(value.name);
      copy.message = this.redact(value.message);
      if (value.stack !== undefined) copy.stack = this.redact(value.stack);
    }
    for (const [key, item] of Object.entries(value)) copy[this.redact(key)] = this.walk(item, seen);
    return copy;
  }
}

/**
 * Tries every rule at `start` (a keyword starts there) and adds the span of
 * the first that matches; returns where the match ends (`start` without one).
 */
function ruleAt(text: string, start: number, spans: Span[]): number {
  if (!startsToken(text, start)) return start;
  const { rules, compiled } = RULES;
  rules.lastIndex = start;
  const match = rules.exec(text);
  if (match === null) return start;
  const index = compiled.findIndex((rule) => match[rule.group] !== undefined);
  const rule = compiled[index]!;
  const secret = rule.secretGroup === null ? match[0] : match[rule.secretGroup]!;
  if (rule.accept && !rule.accept(secret)) return start;
  const end = start + match[0].length;
  spans.push({ start: end - secret.length, end, rank: index + 1, label: `[REDACTED:${rule.kind}]` });
  return end;
}

/** Replaces the union of `spans`; a merged span takes the label of its best-ranked part. */
function replaceSpans(text: string, spans: Span[]): string {
  spans.sort((a, b) => a.start - b.start || b.end - a.end);
  let out = "";
  let copied = 0;
  let current: Span | null = null;
  for (const span of spans) {
    if (current !== null && span.start <= current.end) {
      if (span.end > current.end) current.end = span.end;
      if (span.rank < current.rank) {
        current.rank = span.rank;
        current.label = span.label;
      }
      continue;
    }
    if (current !== null) {
      out += text.slice(copied, current.start) + current.label;
      copied = current.end;
    }
    current = { ...span };
  }
  if (current !== null) {
    out += text.slice(copied, current.start) + current.label;
    copied = current.end;
  }
  return out + text.slice(copied);
}

/** The run's redactor: every secret of {@link runnerSecrets} (the task's `sandbox.secret_env`, the runner's own credentials) and the credential shapes. */
export function redactorFor(task: Parameters<typeof runnerSecrets>[0], env: NodeJS.ProcessEnv): Redactor {
  return new Redactor(runnerSecrets(task, env));
}
