import { isPlaceholder } from "./credential-rules.js";

/**
 * Finds literal values assigned to secret-like names, in the syntaxes
 * credentials are written in: env files and shell (`DB_PASSWORD=…`,
 * `export API_TOKEN="…"`), YAML (`password: …`), JSON (`"client_secret": "…"`,
 * also JSON inside a JSON string), TOML/INI (`api_key = "…"`), code
 * (`apiKey: '…'`, `$token = "…"`, `secret => "…"`) and `--password=…`
 * flags. Only the value is redacted; the name stays readable.
 *
 * The shape follows gitleaks' `generic-api-key` rule (a secret word, an
 * assignment operator, a value) and its allow-list of values made only of
 * letters, `_`, `.` and `-` (such a value is a word or an expression:
 * `getpass`, `request.headers`, `options.token`, `your-api-key`), with
 * these decisions of our own:
 *
 * - **names**: the name's last part (split at `_ - .` and camelCase) is a
 *   secret word (password, passwd, pwd, passphrase, secret, token,
 *   credential(s), or key / pass after a qualifier: `STRIPE_KEY`, `apiKey`,
 *   `DB_PASS`), optionally followed by `_BASE`/`_VALUE` (`SECRET_KEY_BASE`).
 *   Keys and tokens of data structures and tokenizers are not secrets:
 *   `primary_key`, `sortKey`, `public_key`, `next_page_token`, `eos_token`,
 *   `max_tokens` (see {@link NOT_SECRET_QUALIFIERS}).
 * - **values** are literals only: a quoted string, or an unquoted word that
 *   ends at whitespace, `;`, `&`, `|`, `#`, a quote or the end of the text.
 *   An unquoted value cut short by `(`, `[`, `{`, `,` or `<` is code
 *   (`getpass()`, `headers["X"]`) and left alone.
 * - kept (not secrets): references and templates (`$VAR`, `${VAR}`,
 *   `$(cmd)`, `%VAR%`, `{{ x }}`, `<your-key>`), masks (`****`), documentation
 *   words (`changeme`, `password`, `example`, `your-…`: see
 *   {@link isPlaceholder}), paths (`/run/secrets/db`, `~/.ssh/id_rsa`,
 *   `./key.pem`), versions (`"path-key": "^3.1.0"`), values with spaces
 *   (messages: `token: "Invalid token, try again"`), values shorter than 6
 *   characters, and letters-only values (gitleaks' rule: `password:
 *   "password-field"` in code is a word) except for a password in an
 *   upper-case `NAME=value` without spaces, which is a literal by the syntax
 *   of env files and shells, 8 characters or more
 *   (`DB_PASSWORD=correcthorsebattery`).
 *
 * Limits: a value over 400 characters, a password with spaces or made only
 * of letters outside env syntax, a password holding a quote or a backslash
 * in an unquoted assignment, and names that are not secret-like
 * (`DATABASE_URL=...` without a `user:password@`) are not found here.
 */
export interface SecretAssignment {
  /** Where the value starts and ends in the text, [start, end). */
  start: number;
  end: number;
  kind: "password" | "secret-assignment" | "aws-secret-access-key";
}

const SECRET_WORD = "passw(?:or)?d|passphrase|pwd|pass|secret|token|credentials?|key";

/**
 * What comes before an assignment operator's `=` or `:` (a look-behind
 * source for a search anchored on `[=:]`, flags `i`): the secret word, its
 * suffix, a closing quote and spaces, and the first character of `:=` `?=`
 * `||=`. Its one group is all of that, so the name's word starts at the
 * operator's index minus the group's length.
 */
export const BEFORE_ASSIGNMENT = `((?:${SECRET_WORD})(?:[_-](?:base|value))?(?:\\\\*["'])?[ \\t]*[:?|]{0,2})`;

const ASSIGNMENT = new RegExp(
  // 1: the secret word (the end of the name) with its optional suffix; 2: the closing quote of a quoted name
  `(${SECRET_WORD}(?:[_-](?:base|value))?)(\\\\*["'])?` +
    // 3: the operator: = := => ?= ||= : (a colon needs a quoted or spaced value, as in YAML and JSON)
    "[ \\t]*(=>|:=|\\?=|\\|\\|=|=|:)[ \\t]*" +
    // 4-8: the value: "json string" | 'single' | `backtick` | \"escaped json\" | unquoted word
    '(?:"((?:[^"\\\\\\r\\n]|\\\\.){1,400})"|\'([^\'\\r\\n]{1,400})\'|`([^`$\\r\\n]{1,400})`|\\\\+"([^"\\\\\\r\\n]{1,400})\\\\+"' +
    '|([^\\s"\'`\\\\,;()\\[\\]{}<>=][^\\s"\'`\\\\,;()\\[\\]{}<>]{0,399})(?=[\\s;&|#"\'`]|\\\\+[nrt"]|$))',
  "yid",
);

/** Qualifiers before key/token that make a data-structure key or a tokenizer token, not a credential. */
const NOT_SECRET_QUALIFIERS = new Set([
  // SWE-bench's FAIL_TO_PASS and PASS_TO_PASS test lists
  "to",
  // keys of data structures, caches, UIs and i18n
  "primary",
  "foreign",
  "sort",
  "partition",
  "range",
  "hash",
  "row",
  "column",
  "cache",
  "dict",
  "map",
  "lookup",
  "group",
  "index",
  "idx",
  "unique",
  "composite",
  "natural",
  "surrogate",
  "object",
  "bucket",
  "schema",
  "sequence",
  "hot",
  "react",
  "i18n",
  "translation",
  "message",
  "label",
  "state",
  "query",
  "search",
  "shard",
  "routing",
  "dedup",
  "dedupe",
  "idempotency",
  "public",
  "pub",
  "field",
  "attribute",
  "attr",
  "property",
  "prop",
  "option",
  "config",
  "setting",
  "env",
  "name",
  "cursor",
  "registry",
  "path",
  "file",
  // pagination, cancellation and tokenizer tokens
  "next",
  "page",
  "continuation",
  "cancel",
  "cancellation",
  "pagination",
  "sync",
  "max",
  "num",
  "total",
  "input",
  "output",
  "prompt",
  "completion",
  "start",
  "end",
  "eos",
  "bos",
  "pad",
  "unk",
  "sep",
  "cls",
  "mask",
  "special",
  "stop",
]);

/** Concatenated names (`apikey`, `PGPASSWORD`, `AUTHTOKEN`) whose secret word follows one of these. */
const QUALIFIERS =
  /(?:api|auth|access|secret|private|client|master|signing|encryption|session|refresh|app|bot|user|admin|service|account|webhook|db|pg|root|deploy|oauth|bearer|license|sas)$/;

/** A version or version range (`^3.1.0`, `~1.2`, `1.2.3-beta.1`): package manifests map names such as `path-key` to these. */
const VERSION = /^[\^~]?v?\d+(?:\.[\dx*]+)+(?:[-+][\w.]+)?$/;

const PASSWORD_WORDS = /^(?:passw(?:or)?d|passphrase|pwd|pass)$/i;

/**
 * The assignment whose secret word starts at `wordStart` (found through
 * {@link BEFORE_ASSIGNMENT}), or null when it assigns no literal secret.
 */
export function assignmentAt(text: string, wordStart: number): SecretAssignment | null {
  ASSIGNMENT.lastIndex = wordStart;
  const match = ASSIGNMENT.exec(text);
  return match === null ? null : classify(text, match);
}

function classify(text: string, match: RegExpExecArray): SecretAssignment | null {
  const indices = match.indices!;
  const valueGroup = [4, 5, 6, 7, 8].find((group) => match[group] !== undefined)!;
  const value = match[valueGroup]!;
  const [start, end] = indices[valueGroup]!;
  const quoted = valueGroup !== 8;
  const [wordStart, wordEnd] = indices[1]!;
  const [operatorStart, operatorEnd] = indices[3]!;
  const operator = match[3]!;
  // A colon assigns only with a space (YAML) or a quoted value (JSON); `a:b` is a URL, a time, a label.
  if (operator === ":" && !quoted && start === operatorEnd) return null;
  const name = nameEndingAt(text, wordStart, wordEnd);
  if (name === null) return null;
  if (value.length < 6 || isPlaceholder(value) || /^(?:~?\/|\.\.?\/)/.test(value) || VERSION.test(value) || /\s/.test(value)) return null;
  const password = PASSWORD_WORDS.test(name.word);
  const envStyle = !quoted && operator === "=" && operatorStart === wordEnd && start === operatorEnd && /^[A-Z][A-Z0-9_]*$/.test(name.full);
  if (/^[A-Za-z_.-]+$/.test(value) && !(password && envStyle && value.length >= 8)) return null;
  // An unquoted identifier path is code (`config.api_key2`), not a literal.
  if (!quoted && !envStyle && /^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$/.test(value)) return null;
  const kind =
    /secret_?access_?key$/i.test(name.full) && /^[A-Za-z0-9+/]{40}$/.test(value) ? "aws-secret-access-key" : password ? "password" : "secret-assignment";
  return { start, end, kind };
}

/**
 * The whole name whose last part is the secret word at [wordStart, wordEnd),
 * or null when the word is inside another word (`monkey`, `bypass`) or its
 * qualifier makes it no credential (`sort_key`, `max_tokens`).
 */
function nameEndingAt(text: string, wordStart: number, wordEnd: number): { full: string; word: string } | null {
  let start = wordStart;
  while (start > 0 && /[A-Za-z0-9_.-]/.test(text[start - 1]!)) start -= 1;
  // A name right after a JSON escape (`\nDB_PASSWORD=`) starts after the escape's letter.
  if (start > 0 && text[start - 1] === "\\" && /[nrt]/.test(text[start]!)) start += 1;
  // `skills/lint/.secret` is a path, not a name.
  if (start > 0 && text[start - 1] === "/") return null;
  const full = text.slice(start, wordEnd);
  const wordWithSuffix = text.slice(wordStart, wordEnd);
  const word = wordWithSuffix.replace(/[_-](?:base|value)$/i, "");
  const before = text.slice(start, wordStart);
  const lowerWord = word.toLowerCase();
  const needsQualifier = lowerWord === "key" || lowerWord === "pass";
  if (before.length === 0 || /[_.-]$/.test(before)) {
    // A separate part: BEFORE_WORD, before.word, before-word, or the word alone.
    const qualifier = before
      .replace(/[_.-]+$/, "")
      .split(/[_.-]/)
      .pop()!
      .toLowerCase();
    if (needsQualifier && qualifier === "") return null;
    return NOT_SECRET_QUALIFIERS.has(qualifier) ? null : { full, word };
  }
  const last = before[before.length - 1]!;
  if (/[a-z0-9]/.test(last) && /^[A-Z]/.test(word)) {
    // camelCase: apiKey, clientSecret, nextPageToken
    const qualifier = before
      .split(/(?=[A-Z])|[_.-]/)
      .pop()!
      .toLowerCase();
    return NOT_SECRET_QUALIFIERS.has(qualifier) ? null : { full, word };
  }
  // One word: apikey, PGPASSWORD, AUTHTOKEN; not monkey, bypass, turkey.
  if (/^(?:passw(?:or)?d|passphrase)$/i.test(word)) return { full, word };
  return QUALIFIERS.test(before.toLowerCase()) ? { full, word } : null;
}
