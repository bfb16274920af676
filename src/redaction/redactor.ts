/**
 * Secret redaction for everything a run records: session.json, events.jsonl,
 * report.json and the diagnostic log. A {@link Redactor} replaces
 *
 * - **literal secret values** (the runner's `OPENAI_API_KEY`, the values of the
 *   task's `sandbox.secret_env` variables) with `[REDACTED]`, wherever they
 *   occur, also JSON-escaped (once or twice: a JSON string inside a JSON
 *   string, such as tool-call arguments in a log line), and
 * - **well-known token shapes** with `[REDACTED:<kind>]`, even when nobody told
 *   the runner about the token (a tool printed a credential it found).
 *
 * Token shapes and where they come from:
 *
 * | kind            | shape                                                       | source |
 * |---|---|---|
 * | `openai-key`    | `sk-` + 20+ letters/digits, or `sk-proj-` / `sk-svcacct-` / `sk-admin-` + 20+ of `[A-Za-z0-9_-]` | OpenAI API keys page and GitHub's secret-scanning pattern list (https://docs.github.com/en/code-security/secret-scanning/introduction/supported-secret-scanning-patterns) |
 * | `github-token`  | `ghp_` `gho_` `ghu_` `ghs_` `ghr_` + 36–255 of `[A-Za-z0-9_]`; `github_pat_` + 22+ of `[A-Za-z0-9_]` | GitHub changelog "Authentication token format updates" (https://github.blog/changelog/2021-03-31-authentication-token-format-updates-are-generally-available/), blog "Behind GitHub's new authentication token formats" (2021-04-05), fine-grained PATs (changelog 2022-10-18) |
 * | `aws-access-key-id` | `AKIA` (long-term) or `ASIA` (STS temporary) + 16 of `[A-Z0-9]` | AWS IAM User Guide, "IAM identifiers → Unique identifiers" (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids); STS GetAccessKeyInfo |
 * | `bearer-token`  | `Bearer` (any case) + whitespace + a b64token of 16+ chars containing a digit; the word `Bearer` is kept | RFC 6750 §2.1 (https://www.rfc-editor.org/rfc/rfc6750#section-2.1) |
 * | `slack-token`   | `xoxb-` `xoxa-` `xoxp-` `xoxr-` `xoxs-` + 10+ of `[A-Za-z0-9-]` | Slack "Token types" (https://docs.slack.dev/authentication/tokens) |
 * | `private-key`   | `-----BEGIN … PRIVATE KEY-----` through the matching `-----END … PRIVATE KEY-----`; when the end line is missing (truncated output), to the end of the text or the next `"` (so a JSON string stays well-formed) | RFC 7468 (textual encodings of PKIX/PKCS structures), OpenSSH key format |
 *
 * The shapes are anchored on word boundaries and ask for lengths real tokens
 * have, so ordinary text (`task-runner`, `skip`, git SHAs, "a Bearer token")
 * is left alone. An AWS *secret* access key has no recognisable shape (40
 * base64 characters) and is only redacted when it is a literal secret value.
 *
 * Literal values shorter than {@link MIN_SECRET_LENGTH} characters are ignored
 * (a 3-character "secret" would redact every third word) and reported in
 * {@link Redactor.skipped} so the caller can warn. Overlapping matches (one
 * secret containing or overlapping another, a token inside a literal) are
 * merged into one redacted span, so no fragment of either survives.
 *
 * `redact` works on decoded text. On serialized JSON it still catches literal
 * values (their escaped forms are searched too) and most shapes, but a token
 * right after an escape such as `\n` has no word boundary before it: parse
 * the JSON and use {@link Redactor.redactDeep} instead (the logger does).
 *
 * Cost: one `indexOf` scan per literal form plus one regular-expression scan
 * for the shapes; a 1 MB string without secrets takes about a millisecond.
 */

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

interface Shape {
  kind: string;
  /** Source of one alternative of the combined pattern; exactly one capture group. */
  source: string;
  /** For shapes that keep a prefix (Bearer): the token is the last capture group of its own. */
  keepPrefix?: boolean;
}

// Token characters of RFC 6750's b64token.
const B64 = "[A-Za-z0-9\\-._~+/]";

/** Order matters when matches coincide: the first kind named wins (Bearer last). */
const SHAPES: readonly Shape[] = [
  { kind: "private-key", source: "-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY-----[^\"]*?(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY-----|(?=\\\\*\")|$)" },
  { kind: "openai-key", source: "\\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20,})" },
  { kind: "github-token", source: "\\b(?:gh[pousr]_[A-Za-z0-9_]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\\b" },
  { kind: "aws-access-key-id", source: "\\b(?:AKIA|ASIA)[A-Z0-9]{16}\\b" },
  { kind: "slack-token", source: "\\bxox[baprs]-[A-Za-z0-9-]{10,}" },
  { kind: "bearer-token", source: `\\b[Bb][Ee][Aa][Rr][Ee][Rr][ \\t]+((?=${B64}*[0-9])${B64}{16,}=*)`, keepPrefix: true },
];

/** Every shape in one expression, one named-by-position group per shape. */
function combinedShapes(): { regex: RegExp; groupOf: { kind: string; group: number; tokenGroup: number | null }[] } {
  const parts: string[] = [];
  const groupOf: { kind: string; group: number; tokenGroup: number | null }[] = [];
  let group = 1;
  for (const shape of SHAPES) {
    parts.push(`(${shape.source})`);
    const inner = shape.keepPrefix ? 1 : 0;
    groupOf.push({ kind: shape.kind, group, tokenGroup: shape.keepPrefix ? group + 1 : null });
    group += 1 + inner;
  }
  return { regex: new RegExp(parts.join("|"), "g"), groupOf };
}

const SHAPES_COMBINED = combinedShapes();

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
      }
      if (!kept) skipped.push(name);
    }
    this.forms = [...forms].sort((a, b) => b.length - a.length);
    this.skipped = skipped;
  }

  /** True when {@link redact} can never change anything: no literal values and no shapes. */
  get isEmpty(): boolean {
    return this.forms.length === 0 && !this.patterns;
  }

  /** How many literal values (counting their escaped forms) are searched for. */
  get literalCount(): number {
    return this.forms.length;
  }

  /** `text` with every secret value and token shape replaced. */
  redact(text: string): string {
    if (text.length === 0) return text;
    let spans: Span[] | null = null;
    for (const form of this.forms) {
      let at = text.indexOf(form);
      while (at !== -1) {
        (spans ??= []).push({ start: at, end: at + form.length, rank: 0, label: REDACTED });
        at = text.indexOf(form, at + 1);
      }
    }
    if (this.patterns) {
      const { regex, groupOf } = SHAPES_COMBINED;
      regex.lastIndex = 0;
      let match: RegExpExecArray | null;
      while ((match = regex.exec(text)) !== null) {
        for (let i = 0; i < groupOf.length; i++) {
          const shape = groupOf[i]!;
          if (match[shape.group] === undefined) continue;
          const token = shape.tokenGroup === null ? match[0] : match[shape.tokenGroup]!;
          const end = match.index + match[0].length;
          (spans ??= []).push({ start: end - token.length, end, rank: i + 1, label: `[REDACTED:${shape.kind}]` });
          break;
        }
        if (match[0].length === 0) regex.lastIndex += 1;
      }
    }
    if (spans === null) return text;
    return replaceSpans(text, spans);
  }

  /**
   * A copy of `value` with every string redacted: arrays and plain objects are
   * walked (keys are kept as they are), other values returned unchanged.
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
    for (const [key, item] of Object.entries(value)) copy[key] = this.walk(item, seen);
    return copy;
  }
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

/** The secret values a run must keep out of its records: `OPENAI_API_KEY` and the task's `sandbox.secret_env`. */
export function redactorFor(task: { sandbox: { secret_env: readonly string[] } }, env: NodeJS.ProcessEnv): Redactor {
  const names = ["OPENAI_API_KEY", ...task.sandbox.secret_env];
  const secrets: NamedSecret[] = [];
  for (const name of new Set(names)) {
    const value = env[name];
    if (value) secrets.push({ name, value });
  }
  return new Redactor(secrets);
}
