import type { ShellWord } from "./shell-syntax.js";

/**
 * A compiled command pattern (docs/policies.md "Policies", command patterns):
 *
 * - words are separated by spaces; quotes and backslashes work as in the
 *   shell and make what they cover plain text;
 * - the first word is a glob over the command's name (`rm`, `python*`,
 *   `sh|bash`): the basename of the program (`/bin/rm` is `rm`) unless the
 *   glob holds a `/`;
 * - a word starting with `-` is an option the command must have, anywhere
 *   before `--`, in any order: one to three letters are flags (`-rf` means
 *   flags r and f, so `-fr`, `-r -f` and `-vrf` match too); `--force` also
 *   matches `--force=x` and GNU abbreviations like `--forc`; anything else
 *   (`-delete`, `-9`) must appear as written; `-r|-R|--recursive` lists
 *   alternatives;
 * - any other word is a glob (`*` any text, `/` included; `?` one character;
 *   `[abc]` a class; `a|b` alternatives) that must match one of the
 *   command's operands (arguments that are not options); the globs match
 *   operands in the given order, other operands may come between and after;
 * - a lone `|` separates pipeline stages: `curl * | sh` matches a pipeline
 *   where a command matching `curl *` comes before one matching `sh`.
 */
export interface CommandPattern {
  source: string;
  stages: StagePattern[];
}

/** One stage of a pattern: one simple command. */
export interface StagePattern {
  name: GlobWord;
  options: OptionRequirement[];
  operands: GlobWord[];
}

interface GlobWord {
  source: string;
  regex: RegExp;
  /** True when one alternative is a lone `*`: it matches every word, even one whose value is unknown. */
  matchesEverything: boolean;
  /** Name globs with a `/` compare the whole program path, others its basename. */
  hasSlash: boolean;
}

type OptionAlternative = { kind: "flags"; flags: string[] } | { kind: "long"; name: string } | { kind: "exact"; text: string };

interface OptionRequirement {
  source: string;
  alternatives: OptionAlternative[];
}

/** `yes`: matches; `maybe`: would match for some values of the words that are only known at run time. */
export type MatchResult = "no" | "maybe" | "yes";
const MATCH_ORDER: Record<MatchResult, number> = { no: 0, maybe: 1, yes: 2 };

export function weakest(...results: MatchResult[]): MatchResult {
  return results.reduce((weakestSoFar, result) => (MATCH_ORDER[result] < MATCH_ORDER[weakestSoFar] ? result : weakestSoFar), "yes");
}

export function strongest(...results: MatchResult[]): MatchResult {
  return results.reduce((strongestSoFar, result) => (MATCH_ORDER[result] > MATCH_ORDER[strongestSoFar] ? result : strongestSoFar), "no");
}

interface PatternCharacter {
  character: string;
  quoted: boolean;
}

/** Compiles a pattern; returns an error message for a malformed one. */
export function parseCommandPattern(source: string): CommandPattern | string {
  const words = tokenize(source);
  if (typeof words === "string") return words;
  if (words.length === 0) return 'expected a command pattern like "git push" or "rm -rf /"';
  const stageWords: PatternCharacter[][][] = [[]];
  for (const word of words) {
    if (word.length === 1 && word[0]!.character === "|" && !word[0]!.quoted) stageWords.push([]);
    else stageWords.at(-1)!.push(word);
  }
  const stages: StagePattern[] = [];
  for (const [index, stage] of stageWords.entries()) {
    if (stage.length === 0) return `pipeline stage ${index + 1} is empty (write "curl * | sh": a command on each side of |)`;
    const [name, ...rest] = stage;
    if (isOptionWord(name!)) return `stage ${index + 1} starts with the option ${text(name!)}; the first word is the command name`;
    const nameGlob = compileGlobWord(name!);
    if (typeof nameGlob === "string") return nameGlob;
    const compiled: StagePattern = { name: nameGlob, options: [], operands: [] };
    for (const word of rest) {
      if (isOptionWord(word)) {
        const requirement = compileOption(word);
        if (typeof requirement === "string") return requirement;
        compiled.options.push(requirement);
      } else {
        const glob = compileGlobWord(word);
        if (typeof glob === "string") return glob;
        compiled.operands.push(glob);
      }
    }
    stages.push(compiled);
  }
  return { source, stages };
}

function tokenize(source: string): PatternCharacter[][] | string {
  const words: PatternCharacter[][] = [];
  let current: PatternCharacter[] | null = null;
  let quote: string | null = null;
  for (let index = 0; index < source.length; index += 1) {
    const character = source[index]!;
    if (quote !== null) {
      if (character === quote) quote = null;
      else current!.push({ character, quoted: true });
      continue;
    }
    if (/\s/.test(character)) {
      if (current) words.push(current);
      current = null;
      continue;
    }
    current ??= [];
    if (character === "'" || character === '"') quote = character;
    else if (character === "\\") {
      const next = source[index + 1];
      if (next === undefined) return "the pattern ends with a lone backslash";
      current.push({ character: next, quoted: true });
      index += 1;
    } else current.push({ character, quoted: false });
  }
  if (quote !== null) return `unterminated ${quote} quote`;
  if (current) words.push(current);
  return words;
}

function text(word: PatternCharacter[]): string {
  return word.map((part) => part.character).join("");
}

function isOptionWord(word: PatternCharacter[]): boolean {
  return word.length > 1 && word[0]!.character === "-" && !word[0]!.quoted;
}

/** Splits a word at its unquoted `|`. */
function alternativesOf(word: PatternCharacter[]): PatternCharacter[][] {
  const alternatives: PatternCharacter[][] = [[]];
  for (const part of word) {
    if (part.character === "|" && !part.quoted) alternatives.push([]);
    else alternatives.at(-1)!.push(part);
  }
  return alternatives;
}

function compileOption(word: PatternCharacter[]): OptionRequirement | string {
  const source = text(word);
  const alternatives: OptionAlternative[] = [];
  for (const alternative of alternativesOf(word)) {
    const value = text(alternative);
    if (!isOptionWord(alternative) || value === "--") {
      return `"${source}": every alternative of an option must be an option like -r or --recursive (got "${value}")`;
    }
    if (/^--[^=]+$/.test(value)) alternatives.push({ kind: "long", name: value.slice(2) });
    else if (/^-[A-Za-z]{1,3}$/.test(value)) alternatives.push({ kind: "flags", flags: [...value.slice(1)] });
    else alternatives.push({ kind: "exact", text: value });
  }
  return { source, alternatives };
}

function compileGlobWord(word: PatternCharacter[]): GlobWord | string {
  const source = text(word);
  const alternatives = alternativesOf(word);
  if (alternatives.some((alternative) => alternative.length === 0)) return `"${source}": an empty alternative (a | with nothing on one side)`;
  const sources = alternatives.map(globToRegexSource);
  return {
    source,
    regex: new RegExp(`^(?:${sources.join("|")})$`),
    matchesEverything: alternatives.some((alternative) => alternative.every((part) => part.character === "*" && !part.quoted)),
    hasSlash: source.includes("/"),
  };
}

function globToRegexSource(glob: PatternCharacter[]): string {
  let output = "";
  for (let index = 0; index < glob.length; index += 1) {
    const { character, quoted } = glob[index]!;
    if (quoted) output += escapeRegex(character);
    else if (character === "*") output += "[\\s\\S]*";
    else if (character === "?") output += "[\\s\\S]";
    else if (character === "[") {
      const close = glob.findIndex((part, position) => position > index + 1 && part.character === "]" && !part.quoted);
      if (close === -1) {
        output += "\\[";
        continue;
      }
      let members = glob.slice(index + 1, close).map((part) => part.character);
      const negated = members[0] === "!" || members[0] === "^";
      if (negated) members = members.slice(1);
      output += `[${negated ? "^" : ""}${members.map((member) => (member === "-" ? "-" : escapeRegex(member))).join("")}]`;
      index = close;
    } else output += escapeRegex(character);
  }
  return output;
}

function escapeRegex(character: string): string {
  return character.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}

/** The basename of a program path; `/bin/rm` is `rm`. */
export function commandBaseName(value: string): string {
  const trimmed = value.replace(/\/+$/, "");
  return trimmed.slice(trimmed.lastIndexOf("/") + 1) || value;
}

function matchName(glob: GlobWord, word: ShellWord): MatchResult {
  if (word.kind === "dynamic" || word.unquotedGlob) return glob.matchesEverything ? "yes" : "maybe";
  return glob.regex.test(glob.hasSlash ? word.value : commandBaseName(word.value)) ? "yes" : "no";
}

function matchGlob(glob: GlobWord, word: ShellWord): MatchResult {
  if (word.kind === "dynamic") return glob.matchesEverything ? "yes" : "maybe";
  return glob.regex.test(word.value) ? "yes" : "no";
}

/** Matches one stage against a command's words (name first). */
export function matchStage(stage: StagePattern, words: readonly ShellWord[]): MatchResult {
  const [name, ...rest] = words;
  if (!name) return "no";
  const nameResult = matchName(stage.name, name);
  if (nameResult === "no") return "no";
  const options: ShellWord[] = [];
  const operands: ShellWord[] = [];
  let afterOptions = false;
  for (const word of rest) {
    if (afterOptions) operands.push(word);
    else if (word.kind === "literal" && word.value === "--") afterOptions = true;
    else if (word.kind === "literal" && word.value.length > 1 && word.value.startsWith("-")) options.push(word);
    else if (word.kind === "literal" || word.operand) operands.push(word);
    else {
      // Unknown: it may be an option or an operand (or several of either).
      options.push(word);
      operands.push(word);
    }
  }
  const results: MatchResult[] = [nameResult];
  for (const requirement of stage.options) {
    results.push(strongest(...requirement.alternatives.map((alternative) => matchOption(alternative, options))));
  }
  results.push(matchOperands(stage.operands, operands));
  return weakest(...results);
}

function matchOption(alternative: OptionAlternative, options: ShellWord[]): MatchResult {
  const literals = options.flatMap((word) => (word.kind === "literal" ? [word.value] : []));
  const unknown = literals.length < options.length ? "maybe" : "no";
  switch (alternative.kind) {
    case "flags": {
      const present = new Set(literals.filter((value) => !value.startsWith("--")).flatMap((value) => [...value.slice(1).split("=")[0]!]));
      return alternative.flags.every((flag) => present.has(flag)) ? "yes" : unknown;
    }
    case "long":
      return literals.some((value) => {
        if (!value.startsWith("--")) return false;
        const given = value.slice(2).split("=")[0]!;
        return given.length > 0 && alternative.name.startsWith(given);
      })
        ? "yes"
        : unknown;
    case "exact":
      return literals.includes(alternative.text) ? "yes" : unknown;
  }
}

/** Whether the globs match operands in order (an ordered subsequence), best result over all choices. */
function matchOperands(globs: GlobWord[], operands: ShellWord[]): MatchResult {
  const memo = new Map<string, MatchResult>();
  const match = (globIndex: number, operandIndex: number): MatchResult => {
    if (globIndex === globs.length) return "yes";
    if (operands.length - operandIndex < globs.length - globIndex) return "no";
    const key = `${globIndex}:${operandIndex}`;
    const cached = memo.get(key);
    if (cached) return cached;
    const here = matchGlob(globs[globIndex]!, operands[operandIndex]!);
    const taken = here === "no" ? "no" : weakest(here, match(globIndex + 1, operandIndex + 1));
    const result = taken === "yes" ? "yes" : strongest(taken, match(globIndex, operandIndex + 1));
    memo.set(key, result);
    return result;
  };
  return match(0, 0);
}
