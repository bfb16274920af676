/**
 * A long command output as its start and its end: `head`, then `omitted`
 * characters left out, then `tail` is the whole output. The tail is the last
 * `tailCharacters` (all of a short output); the head is what comes before the
 * tail, up to `headCharacters`. A failure's cause is often at the start
 * (the command, a patch that did not apply, an import error) while the verdict
 * is at the end, so a record keeps both.
 */
export interface OutputExcerpt {
  head: string;
  tail: string;
  /** Characters (UTF-16 code units) between head and tail that were left out. */
  omitted: number;
}

export function excerptOutput(output: string, headCharacters: number, tailCharacters: number): OutputExcerpt {
  const tailStart = Math.max(0, output.length - tailCharacters);
  const head = output.slice(0, Math.min(headCharacters, tailStart));
  return { head, tail: output.slice(tailStart), omitted: tailStart - head.length };
}

/**
 * A recorded output (report.json `verify`, a `verify.finished` event; records
 * written before the head was kept have only `output_tail`) as one text for
 * people: the head, a line saying how much was left out, the tail.
 */
export function joinExcerpt(record: { output_head?: string; output_tail: string; output_omitted?: number }): string {
  const head = record.output_head ?? "";
  const omitted = record.output_omitted ?? 0;
  if (!head) return record.output_tail;
  return omitted > 0 ? `${head}\n[… ${omitted} characters left out …]\n${record.output_tail}` : `${head}${record.output_tail}`;
}
