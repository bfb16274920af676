/** A page of a text's lines, for tools that let the model read long text in parts. */
export interface LinePage {
  /** 1-based numbers of the first and last line on the page. */
  first: number;
  last: number;
  /** Lines in the whole text. */
  total: number;
  text: string;
}

/**
 * Lines `offset` (1-based) to `offset + limit - 1` of `text`, stopping early
 * so the page stays within `maxCharacters` (a single longer line is cut and
 * marked). Returns an error message when `offset` is past the end.
 */
export function pageLines(text: string, offset: number, limit: number, maxCharacters = Number.POSITIVE_INFINITY): LinePage | { error: string } {
  const lines = text.split("\n");
  if (offset > lines.length) return { error: `offset ${offset} is past the end: the text has ${lines.length} lines` };
  const page: string[] = [];
  let size = 0;
  for (const line of lines.slice(offset - 1, offset - 1 + limit)) {
    if (page.length > 0 && size + line.length + 1 > maxCharacters) break;
    page.push(line.length > maxCharacters ? `${line.slice(0, maxCharacters)} [line cut]` : line);
    size += line.length + 1;
  }
  return { first: offset, last: offset + page.length - 1, total: lines.length, text: page.join("\n") };
}
