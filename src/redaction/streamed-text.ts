import type { Redactor } from "./redactor.js";

/**
 * Redacts text that arrives in pieces (a model reply as it streams) for a
 * live display: {@link append} returns only text that is safe to show, so a
 * secret split across pieces never shows, not even its start.
 *
 * How: the whole text so far is redacted and the end of it is held back:
 * as many characters as the run's longest literal secret (in any of the
 * forms the redactor searches), or the last run of non-blank characters if
 * that is longer (a credential shape such as `ghp_…` or `sk-…`, or a value
 * after `password=`, is only recognised once complete: the blank that ends
 * it). What is held back when the text ends is never returned: the caller
 * shows the whole reply from its record (`model_call.finished`, redacted).
 *
 * Limits: a redaction that reaches back into text already returned (a
 * credential shape whose match would start before the held-back tail: a
 * multi-line private key is redacted from its `BEGIN` line as soon as 32
 * characters of its body are there, so this needs a shape that spans blanks
 * and more than the tail) stops the stream: nothing more is returned for
 * this text. The text is redacted again only when it has grown by 1/32 of
 * its length since the last time, and by 32 characters at least, so a reply
 * costs about 32 redactions of its whole text per doubling rather than one
 * per piece (bench/redaction.bench.ts); the shown text lags by as much.
 */
/** Fewest characters a text grows by before it is redacted again (see {@link StreamedTextRedactor}). */
const REDACT_EVERY_CHARACTERS = 32;

export class StreamedTextRedactor {
  private text = "";
  /** Redacted text returned so far (a prefix of every later redaction, or the stream stops). */
  private shown = "";
  /** Length of {@link text} at the last redaction. */
  private redactedAt = 0;
  private stopped = false;

  constructor(private readonly redactor: Redactor) {}

  /** Adds a piece; returns the redacted text newly safe to show ("" when there is none yet). */
  append(piece: string): string {
    this.text += piece;
    if (this.stopped || this.text.length - this.redactedAt < Math.max(REDACT_EVERY_CHARACTERS, this.text.length >> 5)) return "";
    this.redactedAt = this.text.length;
    const redacted = this.redactor.redact(this.text);
    const trailingWord = /\S*$/.exec(redacted)![0].length;
    const safe = redacted.slice(0, Math.max(0, redacted.length - Math.max(this.redactor.longestLiteral, trailingWord)));
    if (!safe.startsWith(this.shown)) {
      // A longer hold (a longer last word) only shortens what is safe; anything else rewrote shown text.
      if (!this.shown.startsWith(safe)) this.stopped = true;
      return "";
    }
    const added = safe.slice(this.shown.length);
    this.shown = safe;
    return added;
  }
}
