import type { Node, Parser, Tree } from "web-tree-sitter";

/** More here-documents than this in one script are left as tree-sitter read them (their errors stand). */
const MAX_REWRITES = 64;

/** A script parsed so that every here-document ends where bash ends it, and how to say its text in the user's words. */
export interface AlignedParse {
  tree: Tree;
  /** Turns text taken from the parsed script (a command, a redirect) back into the user's spelling of it. */
  restore(text: string): string;
}

/**
 * Parses `text` with tree-sitter-bash, ending each here-document where bash
 * does. Bash (Bash Reference Manual, "Here Documents") ends the body at the
 * first line that is the delimiter alone (after leading tabs are removed,
 * for `<<-`), or at the end of the input; tree-sitter-bash ends it at the
 * first line that merely starts with the delimiter, even after spaces
 * (`    EOF = "end of input"`, `EOFX = 1`), and fails on a body the input
 * ends. So the here-documents are checked in order, and the first one that
 * tree-sitter ends elsewhere than bash gets a delimiter that occurs nowhere
 * in the script, in its `<<` word and on the line bash ends it at (a line
 * added at the end when bash ends it there), and the script is parsed
 * again. The rewrite changes no byte bash would run or feed to a command;
 * `restore` maps the new delimiters back for messages.
 *
 * Not handled (the script stays "not parsed completely", as before): two
 * here-documents started on one line (`cat <<A <<B`), which tree-sitter-bash
 * cannot parse whatever their delimiters, and the cases `firstMisaligned`
 * leaves alone because bash's end is not the plain rule there.
 */
export function parseAligningHereDocuments(parser: Parser, text: string): AlignedParse | null {
  const renames: { from: string; to: string }[] = [];
  let current = text;
  let previousStart = -1;
  for (let rewrite = 0; ; rewrite += 1) {
    const tree = parser.parse(current);
    if (!tree) return null;
    const misaligned = rewrite < MAX_REWRITES ? firstMisaligned(tree.rootNode, current) : null;
    // A here-document a rewrite did not align sits in a part tree-sitter cannot parse for another reason: its errors stand.
    if (!misaligned || misaligned.startIndex === previousStart) {
      return {
        tree,
        restore: (value) => renames.reduceRight((restored, { from, to }) => restored.split(from).join(to), value),
      };
    }
    tree.delete();
    previousStart = misaligned.startIndex;
    const fresh = freshDelimiter(current);
    renames.push({ from: fresh, to: misaligned.delimiter });
    current = rewriteHereDocument(current, misaligned, fresh);
  }
}

interface Misaligned {
  /** The delimiter word as written (`'EOF'`, `"EOF"`, `\EOF`, `EOF`). */
  startText: string;
  startIndex: number;
  /** The delimiter after quote removal. */
  delimiter: string;
  /** The line bash ends the body at (0-based), or null when the input ends it. */
  endRow: number | null;
}

/**
 * The first here-document tree-sitter ends elsewhere than bash, if it can be
 * rewritten safely; null when all are aligned or the first misaligned one
 * cannot be (then nothing after it is rewritten either: the parse after it is
 * already off, and its errors make the command "not parsed completely").
 * Not rewritten, because bash's own end is not the plain rule there: a
 * here-document inside `$( … )`, backticks or `<( … )` (bash 5 also ends it
 * at a line like `EOF)`), one sharing its line with another, and one whose
 * delimiter word goes on past what tree-sitter took for it (`EOF\r`).
 */
function firstMisaligned(root: Node, text: string): Misaligned | null {
  const lines = text.split("\n");
  const starts = root.descendantsOfType("heredoc_start").sort((left, right) => left.startIndex - right.startIndex);
  for (const start of starts) {
    if (!start) continue;
    const delimiter = removeQuotes(start.text);
    const stripTabs = start.previousSibling?.text === "<<-";
    const redirect = start.parent?.type === "heredoc_redirect" ? start.parent : null;
    const body = redirect?.children.find((child) => child?.type === "heredoc_body") ?? null;
    const end = redirect?.children.find((child) => child?.type === "heredoc_end") ?? null;
    const firstRow = (body ?? end)?.startPosition.row ?? start.startPosition.row + 1;
    let endRow: number | null = null;
    for (let row = firstRow; row < lines.length; row += 1) {
      const line = stripTabs ? lines[row]!.replace(/^\t+/, "") : lines[row]!;
      if (line === delimiter) {
        endRow = row;
        break;
      }
    }
    if (end && endRow !== null && end.startPosition.row === endRow) continue;
    const wordEnds = start.endIndex >= text.length || /[ \t\n;&|<>()]/.test(text[start.endIndex]!);
    const sharesItsLine = starts.some((other) => other && other.id !== start.id && other.startPosition.row === start.startPosition.row);
    if (!wordEnds || sharesItsLine || insideSubstitution(start)) return null;
    return { startText: start.text, startIndex: start.startIndex, delimiter, endRow };
  }
  return null;
}

function insideSubstitution(node: Node): boolean {
  for (let parent = node.parent; parent; parent = parent.parent) {
    if (parent.type === "command_substitution" || parent.type === "process_substitution") return true;
  }
  return false;
}

/** The word bash compares lines with: the delimiter as written, quotes and backslashes removed. */
function removeQuotes(word: string): string {
  let value = "";
  for (let index = 0; index < word.length; index += 1) {
    const character = word[index]!;
    if (character === "\\") {
      value += word[index + 1] ?? "";
      index += 1;
    } else if (character === "'" || character === '"') {
      const close = word.indexOf(character, index + 1);
      if (close === -1) continue;
      value += word.slice(index + 1, close);
      index = close;
    } else value += character;
  }
  return value;
}

function freshDelimiter(text: string): string {
  for (let suffix = 0; ; suffix += 1) {
    const candidate = `AGENT_RUNNER_HEREDOC_${suffix}`;
    if (!text.includes(candidate)) return candidate;
  }
}

function rewriteHereDocument(text: string, misaligned: Misaligned, fresh: string): string {
  const lines = text.split("\n");
  if (misaligned.endRow === null) {
    if (lines.at(-1) === "") lines[lines.length - 1] = fresh;
    else lines.push(fresh);
  } else {
    const line = lines[misaligned.endRow]!;
    lines[misaligned.endRow] = line.slice(0, line.length - misaligned.delimiter.length) + fresh;
  }
  const rewritten = lines.join("\n");
  // The end line comes after the start word, so the start word's index still holds.
  return (
    rewritten.slice(0, misaligned.startIndex) + quotedLike(misaligned.startText, fresh) + rewritten.slice(misaligned.startIndex + misaligned.startText.length)
  );
}

/** `fresh` quoted as the original word was, so a quoted delimiter still makes the body literal. */
function quotedLike(original: string, fresh: string): string {
  if (!/['"\\]/.test(original)) return fresh;
  const quote = original[0];
  if ((quote === "'" || quote === '"') && original.at(-1) === quote) return `${quote}${fresh}${quote}`;
  return `'${fresh}'`;
}
