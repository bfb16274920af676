import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { parseDocument } from "yaml";
import type { AgencyDefinition } from "../agency/load-agency.js";
import { describeYamlError, yamlDocumentValue } from "../describe-issue.js";
import { isPathInside } from "../process/path-inside.js";
import { untrustedTaskProblems } from "../runner/untrusted-task.js";
import { agencyConcurrencyProblems, capAgency, capAgent, type Ceilings } from "../runner/operator-ceilings.js";

/** One refused or unreadable part of an agency from an API caller: where (a file, or `body.agency…`), the dotted field, why. */
export interface AgencyTrustProblem {
  /** The agency or agent file (absolute), or `body.agency` / `body.agency.agents.<n>` for objects. */
  where: string;
  field: string;
  message: string;
}

/**
 * An agency an API caller sent (`POST /v1/agencies`), read once and checked:
 * `object` is what `runner.agency` is given (agents inline, their relative
 * paths made absolute against their own file's directory), `baseDirectory`
 * what the agency's own relative paths (`workspace`, inline agents' scripts)
 * resolve against. `labels[n]` names where agent n came from, so the
 * agency's own validation problems (`agency.agents[n]`) can name the file.
 */
export interface UntrustedAgency {
  object: Record<string, unknown>;
  baseDirectory: string;
  labels: string[];
  /** Problems that refuse it (403): trust rules and paths outside the roots. */
  refused: AgencyTrustProblem[];
  /** Files that could not be read as YAML (422). */
  unreadable: AgencyTrustProblem[];
}

/** Path fields of a task a sandbox build reads; an agent's `sandbox` is task.yaml's. */
const BUILD_PATHS = ["context", "dockerfile"] as const;

/**
 * Reads the agency of `source` for an untrusted caller: `{ file }` (an
 * agency.yaml that must lie, at its real path, inside `roots`) or
 * `{ object }` (agency.yaml's fields, relative paths against the first root).
 * Every file is read once, here: the agents directory and each agent file
 * must lie inside the roots at their real paths before they are read (a
 * link out is refused, never followed), and the agent objects are handed
 * to the agency inline, so what was checked is what runs.
 *
 * The trust rule is the task objects' ({@link untrustedTaskProblems},
 * docs/http-api.md "The trust rule for task objects"), applied to the agency's `workspace` and to
 * every agent as the task its invocations run (its model, sandbox and
 * verify, on the agency's workspace): no hooks, MCP servers, policy files,
 * `model.base_url`, host variables or private-address allowances, and
 * `workspace`, every `model.script` and `sandbox.build` path inside the
 * roots; the agency's `bus` is the embedded `file` one and it names no
 * `pool` (both the operator's). The agency's own per-agent policies (`policies:`, generated from
 * the capabilities) stay the agency's. With `ceilings` (the operator's
 * `--ceiling`s, src/runner/operator-ceilings.ts), a field above its ceiling
 * is refused too (the agency's `budget.max_cost_usd`; each agent's
 * `policies.max_concurrency`, `policies.timeout_seconds`, `max_steps`,
 * `sandbox.limits`, `model.max_cost_usd`; the sum of the agents'
 * `policies.max_concurrency`), and an unset one gets the ceiling where its
 * default is higher.
 */
export function readUntrustedAgency(
  source: { file: string } | { object: Record<string, unknown> },
  roots: readonly string[],
  ceilings?: Ceilings,
): UntrustedAgency {
  const realRoots = roots.map((root) => realOrSelf(resolve(root)));
  const inside = (path: string) => realRoots.some((root) => isPathInside(realOrSelf(path), root));
  const refused: AgencyTrustProblem[] = [];
  const unreadable: AgencyTrustProblem[] = [];
  const outside = (path: string) =>
    `${path} is outside the allowed roots (${roots.join(", ") || "none: start the server with --tasks-root DIR"}); use a path inside one`;

  let raw: Record<string, unknown>;
  let baseDirectory: string;
  let label: string;
  if ("file" in source) {
    label = source.file;
    baseDirectory = dirname(source.file);
    const value = inside(source.file)
      ? readYamlObject(source.file, unreadable)
      : (refused.push({ where: source.file, field: "", message: outside(source.file) }), null);
    if (!value) return { object: {}, baseDirectory, labels: [], refused, unreadable };
    raw = value;
  } else {
    label = "body.agency";
    baseDirectory = roots[0] ?? process.cwd();
    raw = source.object;
  }

  const labels: string[] = [];
  const agents: unknown[] = [];
  const agentBases: string[] = [];
  if (typeof raw.agents === "string" || raw.agents === undefined) {
    const directory = resolve(baseDirectory, typeof raw.agents === "string" ? raw.agents : "./agents");
    if (!inside(directory)) refused.push({ where: label, field: "agents", message: outside(directory) });
    else if (existsSync(directory) && statSync(directory).isDirectory()) {
      for (const name of readdirSync(directory)
        .filter((entry) => /\.ya?ml$/.test(entry))
        .sort()) {
        const file = join(directory, name);
        if (!inside(file)) {
          refused.push({ where: file, field: "", message: outside(file) });
          continue;
        }
        const agent = readYamlObject(file, unreadable);
        if (!agent) continue;
        agents.push(agent);
        agentBases.push(dirname(file));
        labels.push(file);
      }
    }
    // A missing directory, or one without agent files, is the agency's own problem to name (422).
  } else if (Array.isArray(raw.agents)) {
    raw.agents.forEach((agent: unknown, index) => {
      agents.push(agent);
      agentBases.push(baseDirectory);
      labels.push(`${label}.agents.${index}`);
    });
  }

  refused.push(...remoteBusProblems(raw).map((problem) => ({ where: label, ...problem })));
  const workspace = typeof raw.workspace === "string" && raw.workspace ? raw.workspace : ".";
  const workspacePath = isAbsolute(workspace) ? workspace : resolve(baseDirectory, workspace);
  for (const problem of untrustedTaskProblems({ workspace: workspacePath }, { roots, baseDirectory, rootsOption: "--tasks-root" })) {
    refused.push({ where: label, field: problem.path, message: problem.message });
  }
  const inline = agents.map((agent, index) => {
    const absolute = absolutePaths(agent, agentBases[index]!);
    refused.push(...agentProblems(absolute, workspacePath, roots).map((problem) => ({ where: labels[index]!, ...problem })));
    if (!ceilings) return absolute;
    const capped = capAgent(absolute, ceilings);
    refused.push(...capped.problems.map((problem) => ({ where: labels[index]!, field: problem.path, message: problem.message })));
    return capped.file;
  });
  if (ceilings)
    refused.push(...agencyConcurrencyProblems(inline, ceilings).map((problem) => ({ where: label, field: problem.path, message: problem.message })));
  const agency = ceilings ? capAgency(raw, ceilings) : { problems: [], agency: raw };
  refused.push(...agency.problems.map((problem) => ({ where: label, field: problem.path, message: problem.message })));
  return { object: { ...(agency.agency as Record<string, unknown>), agents: inline.length ? inline : raw.agents }, baseDirectory, labels, refused, unreadable };
}

/**
 * Why a recorded agency (agency.json's validated definition) is not one the
 * server's callers may use, or null: the same rule as
 * {@link readUntrustedAgency}, on what the agency runs, so the user's own
 * agencies elsewhere stay out of reach, as `recordedRunRefusal` keeps their runs.
 */
export function recordedAgencyRefusal(definition: AgencyDefinition, roots: readonly string[]): string | null {
  // A recorded pool is the schema's default unless set, and only a nats:// bus reads it: the bus decides.
  const bus = remoteBusProblems({ bus: definition.bus });
  if (bus.length) return `${bus[0]!.field}: ${bus[0]!.message}`;
  const workspace = untrustedTaskProblems({ workspace: definition.workspacePath }, { roots, baseDirectory: definition.workspacePath });
  if (workspace.length) return `workspace: ${workspace[0]!.message}`;
  for (const agent of definition.agents) {
    const scripts = agent.scripts.length ? agent.scripts : [undefined];
    for (const script of scripts) {
      const model = script === undefined ? agent.model : { ...agent.model, script };
      // A validated definition carries the schema's defaults (`pass_env: []`): an empty field sets nothing.
      const problems = agentProblems({ agent: withoutEmpty({ ...agent, model }) }, definition.workspacePath, roots);
      if (problems.length) return `agent ${agent.name}: ${problems[0]!.field}: ${problems[0]!.message}`;
    }
  }
  return null;
}

/**
 * Why agency.yaml's `bus` / `pool` (`raw`, as sent) are not an API caller's
 * to choose: anything but the embedded `file` bus has the server connect, with
 * its own NATS credentials (RUNNER_NATS_*), to a host the caller names, and a
 * pool picks which of the operator's workers run the caller's agents.
 */
function remoteBusProblems(raw: Record<string, unknown>): { field: string; message: string }[] {
  const problems: { field: string; message: string }[] = [];
  if (raw.bus !== undefined && raw.bus !== "file") {
    problems.push({
      field: "bus",
      message: `an API caller's agency runs on the server's embedded bus only (asked ${JSON.stringify(raw.bus)}); leave bus unset or write bus: file`,
    });
  }
  if (raw.pool !== undefined) {
    problems.push({ field: "pool", message: "an API caller's agency may not choose a worker pool (the operator's workers); leave pool unset" });
  }
  return problems;
}

/** The trust problems of one agent file's object (`{ agent: {...} }`), its paths absolute, as the task its invocations run. */
function agentProblems(file: unknown, workspacePath: string, roots: readonly string[]): { field: string; message: string }[] {
  const agent = (file as { agent?: unknown } | null)?.agent;
  if (typeof agent !== "object" || agent === null || Array.isArray(agent)) return [];
  const fields = agent as Record<string, unknown>;
  const model = fields.model as Record<string, unknown> | undefined;
  const scripts = Array.isArray(model?.script) ? (model.script as unknown[]) : [model?.script];
  const problems: { field: string; message: string }[] = [];
  scripts.forEach((script, index) => {
    const task = { ...fields, workspace: workspacePath, ...(model ? { model: { ...model, script } } : {}) };
    for (const problem of untrustedTaskProblems(task, { roots, baseDirectory: workspacePath, rootsOption: "--tasks-root" })) {
      // The workspace is the agency's (checked once); a list of scripts names each entry.
      if (problem.path === "workspace") continue;
      if (index > 0 && problem.path !== "model.script") continue;
      const field = problem.path === "model.script" && scripts.length > 1 ? `agent.model.script.${index}` : `agent.${problem.path}`;
      problems.push({ field, message: problem.message });
    }
  });
  return problems;
}

/** `value` without empty arrays and objects, at any depth. */
function withoutEmpty(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutEmpty);
  if (typeof value !== "object" || value === null) return value;
  const kept: Record<string, unknown> = {};
  for (const [key, entry] of Object.entries(value)) {
    const pruned = withoutEmpty(entry);
    const empty = Array.isArray(pruned) ? pruned.length === 0 : typeof pruned === "object" && pruned !== null && Object.keys(pruned).length === 0;
    if (!empty) kept[key] = pruned;
  }
  return kept;
}

/** An agent file's object with `model.script` (one or a list) and `sandbox.build` paths absolute against `base`. */
function absolutePaths(file: unknown, base: string): unknown {
  const agent = (file as { agent?: unknown } | null)?.agent;
  if (typeof agent !== "object" || agent === null || Array.isArray(agent)) return file;
  const fields = { ...(agent as Record<string, unknown>) };
  const absolute = (value: unknown) => (typeof value === "string" && value !== "" && !isAbsolute(value) ? resolve(base, value) : value);
  if (typeof fields.model === "object" && fields.model !== null) {
    const model = { ...(fields.model as Record<string, unknown>) };
    if (model.script !== undefined) model.script = Array.isArray(model.script) ? model.script.map(absolute) : absolute(model.script);
    fields.model = model;
  }
  const sandbox = fields.sandbox as Record<string, unknown> | undefined;
  if (typeof sandbox?.build === "object" && sandbox.build !== null) {
    const build = { ...(sandbox.build as Record<string, unknown>) };
    for (const key of BUILD_PATHS) if (build[key] !== undefined) build[key] = absolute(build[key]);
    fields.sandbox = { ...sandbox, build };
  }
  return { ...(file as Record<string, unknown>), agent: fields };
}

/** The mapping in YAML file `file`, or null with the problem recorded. */
function readYamlObject(file: string, problems: AgencyTrustProblem[]): Record<string, unknown> | null {
  if (!existsSync(file) || !statSync(file).isFile()) {
    problems.push({ where: file, field: "", message: "file not found; name an agency.yaml inside --tasks-root" });
    return null;
  }
  const text = readFileSync(file, "utf8");
  const document = parseDocument(text, { prettyErrors: true });
  if (document.errors.length) {
    for (const error of document.errors) problems.push({ where: file, field: "", message: describeYamlError(error, text) });
    return null;
  }
  const value = yamlDocumentValue(document);
  if ("problem" in value) {
    problems.push({ where: file, field: "", message: value.problem });
    return null;
  }
  if (typeof value.value !== "object" || value.value === null || Array.isArray(value.value)) {
    problems.push({ where: file, field: "", message: "expected a mapping of fields" });
    return null;
  }
  return value.value as Record<string, unknown>;
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    const parent = dirname(path);
    return parent === path ? path : join(realOrSelf(parent), relative(parent, path));
  }
}
