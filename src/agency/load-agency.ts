import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parseDocument } from "yaml";
import type { z } from "zod";
import { describeIssue, describeYamlError, yamlDocumentValue } from "../describe-issue.js";
import { ConfigError } from "../errors.js";
import { configuredModelId, pricingOf } from "../model/pricing.js";
import { resolveRepository } from "../workspace/run-worktree.js";
import { agencyFileSchema, agentFileSchema, type AgencyFile, type AgentFile } from "./agency-schema.js";
import { outputSchemaProblems } from "./guards/structured-output.js";
import type { TriggerRule } from "./trigger-rule.js";
import { fallbackProblems } from "./guards/circuit-breaker.js";
import { remoteInvocationProblems } from "./invocation-executor.js";

/** One problem of an agency's files: the file, the dotted field, what is wrong and how to fix it. */
export interface AgencyProblem {
  /** Absolute path of agency.yaml or of an agent file; `agency` or `agents[<n>]` for objects given to the library. */
  file: string;
  /** Dotted field path, e.g. `agent.policies.max_concurrency`; empty for the file itself. */
  field: string;
  message: string;
}

/** Every problem of an agency's files at once (exit 2), thrown before anything of the agency exists. */
export class AgencyFileError extends ConfigError {
  constructor(readonly problems: AgencyProblem[]) {
    super(
      `${problems.length} problem${problems.length === 1 ? "" : "s"} in the agency's files:\n${problems
        .map((problem) => `  - ${problem.file}: ${problem.field || "(file)"}: ${problem.message}`)
        .join("\n")}`,
    );
  }
}

/** A validated agent: the file's fields with defaults, triggers and capabilities flattened, the script path absolute. */
export interface AgentDefinition extends Omit<AgentFile["agent"], "triggers" | "capabilities"> {
  /** Event types and `.*` prefixes: the `event` of each of {@link triggerRules}. */
  triggers: string[];
  /** The triggers whole, with their `when` conditions (absent in agency records written before conditions existed). */
  triggerRules?: TriggerRule[];
  /** Tool names. */
  capabilities: string[];
  /** The agent file (absolute), or null for an object given to the library. */
  file: string | null;
  /**
   * Scripted agents: the scripts (absolute), one per invocation in start order, the last one
   * repeating (`model.script` may be a list, so a scripted pipeline can review and fix in rounds); else empty.
   */
  scripts: string[];
}

/** A validated agency with its agents; every path absolute. */
export interface AgencyDefinition extends Omit<AgencyFile, "agents" | "workspace"> {
  /** agency.yaml (absolute), or null for an object given to the library. */
  file: string | null;
  /** The repository's top level. */
  workspacePath: string;
  agents: AgentDefinition[];
}

/**
 * Reads and validates an agency: `agency.yaml`'s path, or its object (paths
 * relative to `baseDirectory`, default the current directory; `agents` may
 * then also be a list of agent-file objects). Checks every agent file, that
 * agent names are unique, that scripts exist, and that the workspace is a
 * git repository with a commit. Throws {@link AgencyFileError} with every
 * problem (file, field, fix) — nothing is created before that.
 */
export async function loadAgency(source: string | Record<string, unknown>, baseDirectory: string = process.cwd()): Promise<AgencyDefinition> {
  const problems: AgencyProblem[] = [];
  const file = typeof source === "string" ? resolve(source) : null;
  const label = file ?? "agency";
  const raw = typeof source === "string" ? readYaml(file!, problems) : source;
  if (raw === undefined) throw new AgencyFileError(problems);
  const parsed = parseWith(agencyFileSchema, raw, label, "", problems);
  // The agent files are checked even when agency.yaml has problems, so one round fixes all.
  const rawAgents = (raw as { agents?: unknown } | null)?.agents;
  const agentsField = parsed ? parsed.agents : rawAgents === undefined ? "./agents" : rawAgents;
  const directory = file ? dirname(file) : baseDirectory;
  const agents: AgentDefinition[] = [];
  if (typeof agentsField === "string") {
    const agentsDirectory = resolve(directory, agentsField);
    const names =
      existsSync(agentsDirectory) && statSync(agentsDirectory).isDirectory() ? readdirSync(agentsDirectory).filter((name) => /\.ya?ml$/.test(name)) : null;
    if (names === null)
      problems.push({ file: label, field: "agents", message: `${agentsDirectory} is not a directory; point agents at a directory of agent files` });
    else if (names.length === 0)
      problems.push({ file: label, field: "agents", message: `${agentsDirectory} has no *.yaml agent file; add one (runner agency init writes four)` });
    for (const name of (names ?? []).sort()) {
      const agentFile = join(agentsDirectory, name);
      const agentRaw = readYaml(agentFile, problems);
      if (agentRaw === undefined) continue;
      const agent = agentDefinition(agentRaw, agentFile, dirname(agentFile), problems);
      if (agent) agents.push(agent);
    }
  } else if (Array.isArray(agentsField)) {
    agentsField.forEach((agentRaw: unknown, index) => {
      const agent = agentDefinition(agentRaw, `${label}.agents[${index}]`, directory, problems);
      if (agent) agents.push(agent);
    });
  }
  const seen = new Map<string, string>();
  for (const agent of agents) {
    const earlier = seen.get(agent.name);
    if (earlier)
      problems.push({
        file: agent.file ?? label,
        field: "agent.name",
        message: `"${agent.name}" is also the name of ${earlier}; agent names are unique in an agency`,
      });
    else seen.set(agent.name, agent.file ?? label);
  }
  for (const { agent, message } of fallbackProblems(agents)) {
    problems.push({ file: agent.file ?? label, field: "agent.policies.circuit_breaker.fallback", message });
  }
  if (!parsed) throw new AgencyFileError(problems);
  // A budget stops invocations by what they cost: a model without prices has costs nobody knows.
  if (parsed.budget) {
    for (const agent of agents) {
      const pricing = pricingOf(agent.model, configuredModelId(agent.model, process.env));
      if (!pricing.prices)
        problems.push({
          file: agent.file ?? label,
          field: "agent.model",
          message: `the agency's budget.max_cost_usd needs every agent's model priced, and ${pricing.unpriced}`,
        });
    }
  }
  const workspacePath = isAbsolute(parsed.workspace) ? parsed.workspace : resolve(directory, parsed.workspace);
  let repositoryRoot = workspacePath;
  try {
    repositoryRoot = (await resolveRepository(workspacePath)).root;
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push({ file: label, field: "workspace", message: error.message.replace(/^workspace: /, "") });
  }
  // Invocations on workers (docs/scale-out.md "Agencies on workers"): the guards that cannot follow a run there are refused.
  if (parsed.bus !== "file") problems.push(...remoteInvocationProblems({ ...parsed, agents }, label));
  if (problems.length) throw new AgencyFileError(problems);
  const { agents: _agents, workspace: _workspace, ...rest } = parsed;
  return { ...rest, file, workspacePath: repositoryRoot, agents };
}

function agentDefinition(raw: unknown, file: string, directory: string, problems: AgencyProblem[]): AgentDefinition | null {
  // A scripted agent may give a list of scripts, one per invocation; the schema checks the first as task.yaml's `script`.
  const listed = scriptList(raw);
  const parsed = parseWith(agentFileSchema, listed ? withScript(raw, listed[0]) : raw, file, "", problems);
  if (!parsed) return null;
  const { agent } = parsed;
  const scripts: string[] = [];
  if (agent.model.provider === "scripted") {
    if (!agent.model.script) {
      problems.push({ file, field: "agent.model.script", message: "required when model.provider is scripted (a script file, relative to the agent file)" });
      return null;
    }
    for (const [index, entry] of (listed ?? [agent.model.script]).entries()) {
      const script = typeof entry === "string" ? (isAbsolute(entry) ? entry : resolve(directory, entry)) : "";
      const field = listed ? `agent.model.script.${index}` : "agent.model.script";
      if (!script) problems.push({ file, field, message: "expected the path of a script file, relative to the agent file" });
      else if (!existsSync(script)) problems.push({ file, field, message: `${script} does not exist (the path is relative to the agent file)` });
      else scripts.push(script);
    }
    if (scripts.length !== (listed ?? [0]).length) return null;
  } else if (listed) {
    problems.push({ file, field: "agent.model.script", message: "only used with model.provider: scripted" });
    return null;
  }
  if (agent.output_schema) {
    const schemaProblems = outputSchemaProblems(agent.output_schema);
    for (const message of schemaProblems)
      problems.push({ file, field: "agent.output_schema", message: `not a JSON Schema: ${message} (see https://json-schema.org/understanding-json-schema)` });
    if (schemaProblems.length) return null;
  }
  return {
    ...agent,
    model: scripts.length ? { ...agent.model, script: scripts[0]! } : agent.model,
    scripts,
    triggers: agent.triggers.map((trigger) => trigger.event),
    triggerRules: agent.triggers,
    capabilities: [...new Set(agent.capabilities.map((capability) => capability.tool))],
    file: file.startsWith("/") ? file : null,
  };
}

/** `agent.model.script` when it is a list, else null. */
function scriptList(raw: unknown): unknown[] | null {
  const script = (raw as { agent?: { model?: { script?: unknown } } } | null)?.agent?.model?.script;
  return Array.isArray(script) && script.length > 0 ? script : null;
}

function withScript(raw: unknown, script: unknown): unknown {
  const value = raw as { agent: { model: Record<string, unknown> } };
  return { ...value, agent: { ...value.agent, model: { ...value.agent.model, script: typeof script === "string" ? script : "" } } };
}

function parseWith<Schema extends z.ZodType>(schema: Schema, raw: unknown, file: string, prefix: string, problems: AgencyProblem[]): z.infer<Schema> | null {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    problems.push({ file, field: prefix, message: "expected a mapping of fields" });
    return null;
  }
  const parsed = schema.safeParse(raw, { reportInput: true });
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) {
    const problem = describeIssue(issue, "docs/agency.md", schema);
    problems.push({ file, field: [prefix, problem.path].filter(Boolean).join("."), message: problem.message });
  }
  return null;
}

/** The YAML value of `file`, or undefined with the problem recorded. */
function readYaml(file: string, problems: AgencyProblem[]): unknown {
  if (!existsSync(file) || !statSync(file).isFile()) {
    problems.push({ file, field: "", message: "file not found; give the path of an agency.yaml" });
    return undefined;
  }
  const text = readFileSync(file, "utf8");
  const document = parseDocument(text, { prettyErrors: true });
  if (document.errors.length) {
    for (const error of document.errors) problems.push({ file, field: "", message: describeYamlError(error, text) });
    return undefined;
  }
  const value = yamlDocumentValue(document);
  if ("problem" in value) {
    problems.push({ file, field: "", message: value.problem });
    return undefined;
  }
  return value.value;
}
