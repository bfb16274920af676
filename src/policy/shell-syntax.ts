import { createRequire } from "node:module";
import { Language, Parser, type Node } from "web-tree-sitter";
import { parseAligningHereDocuments } from "./here-documents.js";

/**
 * One word of a command as bash would pass it to the program: `literal` when
 * its value is fixed by the text alone (quotes and escapes removed), else
 * `dynamic` (it depends on a variable, a command substitution, arithmetic or
 * brace expansion, so its value is known only when it runs).
 */
export type ShellWord =
  | {
      kind: "literal";
      value: string;
      /** An unquoted `*`, `?` or `[...]`: bash would expand it against file names. */
      unquotedGlob: boolean;
    }
  | {
      kind: "dynamic";
      text: string;
      /** Known to be an operand, never an option (the paths `find -exec` substitutes for `{}`). */
      operand?: boolean;
    };

/** A simple command (`name arg...`) found anywhere in a script. */
export interface ShellSimpleCommand {
  /** Source text of the command, for messages. */
  text: string;
  /** The command word and its arguments; assignments before it (`FOO=1 cmd`) are in `assignments`. */
  words: ShellWord[];
  /** Variables set for this command only (`GIT_PAGER=x git log`). */
  assignments: { name: string; value: ShellWord }[];
  /** Text fed to the command's standard input by a here-document or here-string attached to it. */
  stdin: ShellWord | null;
  /** Its pipeline and position there; `null` outside a pipeline. */
  pipeline: { id: number; index: number } | null;
}

/** A pipeline `a | b | c`; a stage that is not a simple command (a loop, a subshell) is `null`. */
export interface ShellPipeline {
  id: number;
  stages: (ShellSimpleCommand | null)[];
}

/** An output redirection with its operator (`>`, `>>`, `&>`, ...) and target. */
export interface ShellRedirect {
  operator: string;
  target: ShellWord;
  text: string;
}

/** What a script contains, as far as permission checks need it. */
export interface ShellScript {
  commands: ShellSimpleCommand[];
  pipelines: ShellPipeline[];
  /** Redirections that write to a file (`>`, `>>`, `>|`, `&>`, `&>>`, `<>`). */
  writeRedirects: ShellRedirect[];
  /** Syntax errors (empty when the script parsed cleanly); a script with errors may hold more commands than were found. */
  errors: string[];
}

const WRITE_OPERATORS = new Set([">", ">>", ">|", "&>", "&>>", "<>", ">&"]);
const DYNAMIC_NODES = new Set(["simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion", "brace_expression"]);

/**
 * Parses bash with tree-sitter-bash (a WebAssembly build of the official
 * tree-sitter grammar: no native code). `load()` once, then `parse()` is
 * synchronous. The grammar is error-tolerant: a script it cannot fully parse
 * still yields the commands it recognised, plus `errors`.
 */
export class ShellParser {
  private static loading: Promise<ShellParser> | null = null;

  private constructor(private readonly parser: Parser) {}

  /** Loads the grammar (about 1.4 MB of WebAssembly) the first time; later calls share it. */
  static load(): Promise<ShellParser> {
    ShellParser.loading ??= (async () => {
      await Parser.init();
      const require = createRequire(import.meta.url);
      const language = await Language.load(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm"));
      const parser = new Parser();
      parser.setLanguage(language);
      return new ShellParser(parser);
    })();
    return ShellParser.loading;
  }

  /** Here-documents end where bash ends them (see `parseAligningHereDocuments`). */
  parse(text: string): ShellScript {
    const parsed = parseAligningHereDocuments(this.parser, text);
    if (!parsed) return { commands: [], pipelines: [], writeRedirects: [], errors: ["the parser gave up"] };
    try {
      return new ScriptCollector(parsed.restore).collect(parsed.tree.rootNode);
    } finally {
      parsed.tree.delete();
    }
  }
}

class ScriptCollector {
  private readonly script: ShellScript = { commands: [], pipelines: [], writeRedirects: [], errors: [] };
  /** Pipeline position of each command node, by node id. */
  private readonly positions = new Map<number, { pipeline: ShellPipeline; index: number }>();

  constructor(private readonly restore: (text: string) => string) {}

  private source = "";

  collect(root: Node): ShellScript {
    this.source = root.text;
    // Pipelines first: a stage may come before its pipeline node in the tree (`cat <<EOF | sh`).
    for (const pipeline of root.descendantsOfType("pipeline")) this.registerPipeline(pipeline);
    this.visit(root);
    return this.script;
  }

  private visit(node: Node): void {
    if (node.isError || node.isMissing) {
      const line = node.startPosition.row + 1;
      // Said by position, not quoted: a cut piece of the command could carry a piece of a secret no redactor matches.
      const column = node.startPosition.column + 1;
      this.script.errors.push(
        node.isMissing ? `line ${line}: missing ${node.type}` : `line ${line}, column ${column}: cannot parse (${node.text.length} characters from there)`,
      );
    }
    switch (node.type) {
      case "command":
        this.addCommand(node);
        break;
      case "file_redirect":
        this.addRedirect(node);
        break;
    }
    for (const child of node.children) this.visit(child);
  }

  private registerPipeline(node: Node): void {
    const stages = node.namedChildren.map((stage) => commandOfStage(stage));
    // `cat <<EOF | sh`: the grammar puts `| sh` inside the here-document's
    // redirect; the command the here-document belongs to is the first stage.
    if (node.parent?.type === "heredoc_redirect") stages.unshift(commandOfStage(node.parent.parent?.childForFieldName("body") ?? null));
    const pipeline: ShellPipeline = { id: this.script.pipelines.length, stages: stages.map(() => null) };
    this.script.pipelines.push(pipeline);
    stages.forEach((stage, index) => {
      if (stage) this.positions.set(stage.id, { pipeline, index });
    });
  }

  private addCommand(node: Node): void {
    const words: ShellWord[] = [];
    const name = node.childForFieldName("name");
    if (name) words.push(evaluateWord(name));
    for (const argument of node.childrenForFieldName("argument")) words.push(evaluateWord(argument));
    const assignments = node.namedChildren
      .filter((child) => child.type === "variable_assignment")
      .map((assignment) => {
        const value = assignment.childForFieldName("value");
        return {
          name: assignment.childForFieldName("name")?.text ?? "",
          value: value ? evaluateWord(value) : ({ kind: "literal", value: "", unquotedGlob: false } as ShellWord),
        };
      });
    const position = this.positions.get(node.id);
    const command: ShellSimpleCommand = {
      text: this.restore(node.text),
      words,
      assignments,
      stdin: standardInputOf(node, this.source),
      pipeline: position ? { id: position.pipeline.id, index: position.index } : null,
    };
    if (position) position.pipeline.stages[position.index] = command;
    this.script.commands.push(command);
  }

  private addRedirect(node: Node): void {
    const operator = node.children.find((child) => !child.isNamed)?.text ?? "";
    const destination = node.childForFieldName("destination");
    if (!WRITE_OPERATORS.has(operator) || !destination) return;
    // `2>&1`, `>&-`: duplicating a descriptor writes no file.
    if (operator === ">&" && /^(\d+|-)$/.test(destination.text)) return;
    if (destination.type === "process_substitution") return;
    this.script.writeRedirects.push({ operator, target: evaluateWord(destination), text: this.restore(node.text) });
  }
}

/** The simple command a pipeline stage is, if it is one. */
function commandOfStage(stage: Node | null): Node | null {
  if (!stage) return null;
  if (stage.type === "command") return stage;
  if (stage.type === "redirected_statement") return commandOfStage(stage.childForFieldName("body"));
  return null;
}

/** A here-document or here-string attached to the command (or to the statement wrapping it). */
function standardInputOf(command: Node, source: string): ShellWord | null {
  const redirects = [...command.childrenForFieldName("redirect")];
  const parent = command.parent;
  if (parent?.type === "redirected_statement" && parent.childForFieldName("body")?.id === command.id) {
    redirects.push(...parent.childrenForFieldName("redirect"));
  }
  for (const redirect of redirects) {
    if (redirect.type === "herestring_redirect") {
      const word = redirect.namedChildren.at(-1);
      if (word) return evaluateWord(word);
    }
    if (redirect.type === "heredoc_redirect") {
      const start = redirect.namedChildren.find((child) => child?.type === "heredoc_start");
      const body = redirect.namedChildren.find((child) => child?.type === "heredoc_body");
      if (!body) return { kind: "literal", value: "", unquotedGlob: false };
      const text = hereDocumentBody(source, body, redirect);
      // A quoted delimiter (<<'EOF', <<"EOF", <<\EOF) makes the body literal.
      if (start && /['"\\]/.test(start.text)) return { kind: "literal", value: text, unquotedGlob: false };
      if (body.namedChildren.some((child) => child && DYNAMIC_NODES.has(child.type))) return { kind: "dynamic", text };
      return { kind: "literal", value: unescapeDoubleQuoted(text), unquotedGlob: false };
    }
  }
  return null;
}

/**
 * The body bash reads: whole lines from the one after the `<<` line to the
 * end line. tree-sitter-bash starts its body node after the first line's
 * leading blanks and, for `<<-`, keeps the end line's tabs; bash strips
 * leading tabs from every line for `<<-` and nothing otherwise.
 */
function hereDocumentBody(source: string, body: Node, redirect: Node): string {
  const end = redirect.namedChildren.find((child) => child?.type === "heredoc_end");
  const lineStart = (index: number): number => source.lastIndexOf("\n", index - 1) + 1;
  const text = end ? source.slice(lineStart(body.startIndex), lineStart(end.startIndex)) : body.text;
  return redirect.children.some((child) => child?.text === "<<-") ? text.replace(/^\t+/gm, "") : text;
}

/** The value bash gives a word node, or `dynamic` when it depends on expansions. */
function evaluateWord(node: Node): ShellWord {
  const state = { value: "", unquoted: "", dynamic: false, glob: false };
  const visit = (part: Node): void => {
    if (DYNAMIC_NODES.has(part.type)) {
      state.dynamic = true;
      return;
    }
    switch (part.type) {
      case "word": {
        state.value += unescapeUnquoted(part.text);
        state.unquoted += part.text;
        if (hasUnquotedGlob(part.text)) state.glob = true;
        return;
      }
      case "number":
        state.value += part.text;
        state.unquoted += part.text;
        return;
      case "raw_string":
        state.value += part.text.slice(1, -1);
        return;
      case "ansi_c_string": {
        const decoded = decodeAnsiC(part.text.slice(2, -1));
        if (decoded === null) state.dynamic = true;
        else state.value += decoded;
        return;
      }
      case "string":
      case "translated_string":
        for (const child of part.children) {
          if (!child.isNamed && child.text === '"') continue;
          if (child.type === "string_content") state.value += unescapeDoubleQuoted(child.text);
          else if (!child.isNamed) state.value += child.text;
          else visit(child);
        }
        return;
      case "concatenation":
      case "command_name":
        for (const child of part.children) {
          if (child.isNamed) visit(child);
          else if (child.text !== "$") {
            state.value += child.text;
            state.unquoted += child.text;
          }
        }
        return;
      default:
        state.dynamic = true;
    }
  };
  visit(node);
  // Brace expansion (`r{m,}`, `{a,b}`) turns one word into several.
  if (/\{[^{}]*(,|\.\.)[^{}]*\}/.test(state.unquoted)) state.dynamic = true;
  if (state.dynamic) return { kind: "dynamic", text: node.text };
  return { kind: "literal", value: state.value, unquotedGlob: state.glob };
}

function unescapeUnquoted(text: string): string {
  return text.replace(/\\(\n|[\s\S])/g, (_match, escaped: string) => (escaped === "\n" ? "" : escaped));
}

function unescapeDoubleQuoted(text: string): string {
  return text.replace(/\\([$`"\\\n])/g, (_match, escaped: string) => (escaped === "\n" ? "" : escaped));
}

function hasUnquotedGlob(text: string): boolean {
  for (let index = 0; index < text.length; index += 1) {
    const character = text[index];
    if (character === "\\") index += 1;
    else if (character === "*" || character === "?") return true;
    else if (character === "[" && text.indexOf("]", index + 2) !== -1) return true;
  }
  return false;
}

const ANSI_C_SIMPLE: Record<string, string> = {
  a: "\x07",
  b: "\b",
  e: "\x1b",
  E: "\x1b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
  v: "\v",
  "\\": "\\",
  "'": "'",
  '"': '"',
  "?": "?",
};

/** Decodes the body of `$'...'`; null for an escape it does not know (then the word counts as dynamic). */
function decodeAnsiC(body: string): string | null {
  let output = "";
  for (let index = 0; index < body.length; index += 1) {
    const character = body[index]!;
    if (character !== "\\") {
      output += character;
      continue;
    }
    const next = body[index + 1];
    if (next === undefined) return null;
    if (next in ANSI_C_SIMPLE) {
      output += ANSI_C_SIMPLE[next];
      index += 1;
      continue;
    }
    const numeric =
      /^[0-7]{1,3}/.exec(body.slice(index + 1)) ??
      (next === "x" ? /^x([0-9a-fA-F]{1,2})/.exec(body.slice(index + 1)) : null) ??
      (next === "u" ? /^u([0-9a-fA-F]{1,4})/.exec(body.slice(index + 1)) : null) ??
      (next === "U" ? /^U([0-9a-fA-F]{1,8})/.exec(body.slice(index + 1)) : null);
    if (numeric) {
      const digits = numeric[1] ?? numeric[0];
      const code = parseInt(digits, numeric[1] === undefined ? 8 : 16);
      if (code > 0x10ffff) return null;
      output += String.fromCodePoint(code);
      index += numeric[0].length;
      continue;
    }
    if (next === "c" && body[index + 2] !== undefined) {
      output += String.fromCharCode(body.charCodeAt(index + 2) & 0x1f);
      index += 2;
      continue;
    }
    return null;
  }
  return output;
}
