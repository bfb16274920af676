import { matchStage, strongest, weakest, type CommandPattern, type MatchResult, parseCommandPattern } from "./command-pattern.js";
import { commandRuleId, commandRulePatterns, RISK_SEVERITY, type Policy, type Risk } from "./policy-schema.js";
import type { ShellParser, ShellScript, ShellSimpleCommand, ShellWord } from "./shell-syntax.js";
import { CODE_VARIABLES, unwrapCommand, type CommandLayer } from "./unwrap-command.js";

/** What one part of a command line (a simple command, a redirection) got, and why. */
export interface CommandFinding {
  risk: Risk;
  /** The rule that decided: `commands.git-push`, `commands[2]`, `default_command_risk`, `command.dynamic-command-word`, ... */
  rule: string;
  reason: string;
  /** The part of the command line it is about. */
  command: string;
}

/** The verdict on a whole command line: its most severe finding (the first of equals). */
export interface CommandJudgement extends CommandFinding {
  findings: CommandFinding[];
}

/** Judges a path a redirection writes to; null when it is not judged (outside /workspace: the sandbox's business). */
export type WriteTargetJudge = (path: string) => { risk: Risk; rule: string; reason: string } | null;

interface CompiledRule {
  id: string;
  risk: Risk;
  reason: string;
  patterns: CommandPattern[];
}

/** Scripts inside scripts (`sh -c "bash -c '...'"`) deeper than this are not followed. */
const MAX_NESTING = 8;
const MESSAGE_TEXT_LIMIT = 160;

/**
 * Judges a `run_shell` command line against a policy's command rules. The
 * line is parsed with a real bash parser and every simple command in it is
 * judged: those in `;`/`&&`/`||`/`|` chains, subshells, braces, loops,
 * functions (whether called or not), `$(...)`, backticks and process
 * substitutions, the code handed to `sh -c`/`bash -c`/`eval`/`trap`, here-
 * documents fed to a shell, and commands started by `find -exec` and
 * `xargs`, each seen through wrappers such as `env`, `sudo`, `nohup`,
 * `timeout`. For each simple command the first rule that matches decides;
 * the line gets the most severe verdict of its parts. Whatever cannot be
 * known before it runs (a command name from a variable, code built at run
 * time, a script piped into a shell, a parse error) is at least `confirm`.
 */
export class CommandJudge {
  private readonly rules: CompiledRule[];

  constructor(
    private readonly policy: Policy,
    private readonly parser: ShellParser,
    private readonly judgeWriteTarget: WriteTargetJudge,
  ) {
    this.rules = policy.commands.map((rule, index) => ({
      id: commandRuleId(rule, index),
      risk: rule.risk,
      reason: rule.reason,
      // The schema validated the patterns.
      patterns: commandRulePatterns(rule).map((pattern) => parseCommandPattern(pattern) as CommandPattern),
    }));
  }

  judge(commandLine: string): CommandJudgement {
    const findings: CommandFinding[] = [];
    this.judgeScript(commandLine, 0, findings);
    if (findings.length === 0) {
      return { risk: "allow", rule: "commands.none", reason: "the command line runs no command", command: shorten(commandLine), findings };
    }
    let decisive = findings[0]!;
    for (const finding of findings) if (RISK_SEVERITY[finding.risk] > RISK_SEVERITY[decisive.risk]) decisive = finding;
    return { ...decisive, findings };
  }

  private judgeScript(text: string, depth: number, findings: CommandFinding[]): void {
    if (depth > MAX_NESTING) {
      findings.push({
        risk: "confirm",
        rule: "command.nesting-too-deep",
        reason: `scripts are nested more than ${MAX_NESTING} deep; the innermost were not checked`,
        command: shorten(text),
      });
      return;
    }
    const script = this.parser.parse(text);
    if (script.errors.length > 0) {
      findings.push({
        risk: "confirm",
        rule: "command.unparsable",
        reason: `the command could not be parsed completely (${script.errors[0]}), so it cannot be checked; only the parts that were understood were judged`,
        command: shorten(text),
      });
    }
    for (const command of script.commands) this.judgeSimpleCommand(command.words, command, script, depth, findings);
    for (const redirect of script.writeRedirects) {
      if (redirect.target.kind !== "literal") continue;
      const verdict = this.judgeWriteTarget(redirect.target.value);
      if (verdict && verdict.risk !== "allow")
        findings.push({ ...verdict, reason: `\`${shorten(redirect.text)}\`: ${verdict.reason}`, command: shorten(redirect.text) });
    }
  }

  private judgeSimpleCommand(
    words: ShellWord[],
    command: ShellSimpleCommand | null,
    script: ShellScript | null,
    depth: number,
    findings: CommandFinding[],
  ): void {
    const text = shorten(command?.text ?? words.map(wordText).join(" "));
    const unwrapped = unwrapCommand(words);
    for (const assignment of command?.assignments ?? []) {
      if (CODE_VARIABLES.has(assignment.name)) unwrapped.scripts.push({ word: assignment.value, origin: assignment.name });
    }
    const program = unwrapped.layers.at(-1)?.words[0];
    if (program && (program.kind === "dynamic" || program.unquotedGlob)) {
      findings.push({
        risk: "confirm",
        rule: "command.dynamic-command-word",
        reason: `\`${text}\`: the program it runs (${wordText(program)}) is only known when it runs, so no rule can judge it`,
        command: text,
      });
    }
    for (const layer of unwrapped.layers) findings.push(...this.judgeLayer(layer, command, script, text));
    for (const embedded of unwrapped.scripts) {
      if (embedded.word.kind === "literal") this.judgeScript(embedded.word.value, depth + 1, findings);
      else {
        findings.push({
          risk: "confirm",
          rule: "command.dynamic-script",
          reason: `\`${text}\`: runs shell code (${embedded.origin}) that is only known when it runs, so it cannot be checked`,
          command: text,
        });
      }
    }
    for (const nested of unwrapped.nested) this.judgeSimpleCommand(nested, null, null, depth + 1, findings);
    if (unwrapped.readsScriptFromStdin) {
      if (command?.stdin?.kind === "literal") this.judgeScript(command.stdin.value, depth + 1, findings);
      else if (command?.stdin || (command?.pipeline && command.pipeline.index > 0)) {
        findings.push({
          risk: "confirm",
          rule: "command.script-from-pipe",
          reason: `\`${text}\`: a shell runs the code fed to its input, which is only known when it runs, so it cannot be checked`,
          command: text,
        });
      }
    }
  }

  /** The first rule that surely matches decides; rules that might match (unknown words) before it make it at least `confirm`. */
  private judgeLayer(layer: CommandLayer, command: ShellSimpleCommand | null, script: ShellScript | null, text: string): CommandFinding[] {
    const findings: CommandFinding[] = [];
    let decided = false;
    for (const rule of this.rules) {
      const result = strongest(...rule.patterns.map((pattern) => this.matchPattern(pattern, layer, command, script)));
      if (result === "yes") {
        findings.push({ risk: rule.risk, rule: rule.id, reason: `\`${text}\`: ${rule.reason}`, command: text });
        decided = true;
        break;
      }
      if (result === "maybe" && rule.risk !== "allow" && findings.length === 0) {
        findings.push({
          risk: "confirm",
          rule: rule.id,
          reason: `\`${text}\` may match rule ${rule.id} (${rule.risk}) once its unknown words are known: ${rule.reason}`,
          command: text,
        });
      }
    }
    if (!decided && !layer.wrapper) {
      const risk = this.policy.default_command_risk;
      const name = wordText(layer.words[0]!);
      findings.push({
        risk,
        rule: "default_command_risk",
        reason: `\`${text}\`: no rule of policy ${this.policy.name} matches ${name}; default_command_risk is ${risk}`,
        command: text,
      });
    }
    return findings;
  }

  private matchPattern(pattern: CommandPattern, layer: CommandLayer, command: ShellSimpleCommand | null, script: ShellScript | null): MatchResult {
    const last = pattern.stages.at(-1)!;
    const here = matchStage(last, layer.words);
    if (pattern.stages.length === 1 || here === "no") return here;
    // Earlier stages must match earlier commands of the same pipeline, in order.
    if (!command?.pipeline || !script) return "no";
    const before = script.pipelines[command.pipeline.id]!.stages.slice(0, command.pipeline.index);
    const earlier = pattern.stages.slice(0, -1);
    const memo = new Map<string, MatchResult>();
    const match = (stageIndex: number, commandIndex: number): MatchResult => {
      if (stageIndex === earlier.length) return "yes";
      if (commandIndex === before.length) return "no";
      const key = `${stageIndex}:${commandIndex}`;
      const cached = memo.get(key);
      if (cached) return cached;
      const candidate = before[commandIndex];
      const stageResult = candidate
        ? strongest(...unwrapCommand(candidate.words).layers.map((candidateLayer) => matchStage(earlier[stageIndex]!, candidateLayer.words)))
        : "no";
      const taken = stageResult === "no" ? "no" : weakest(stageResult, match(stageIndex + 1, commandIndex + 1));
      const result = taken === "yes" ? "yes" : strongest(taken, match(stageIndex, commandIndex + 1));
      memo.set(key, result);
      return result;
    };
    return weakest(here, match(0, 0));
  }
}

function wordText(word: ShellWord): string {
  return word.kind === "literal" ? word.value : word.text;
}

function shorten(text: string): string {
  const single = text.replace(/\s*\n\s*/g, " ⏎ ").trim();
  return single.length > MESSAGE_TEXT_LIMIT ? `${single.slice(0, MESSAGE_TEXT_LIMIT - 1)}…` : single;
}
