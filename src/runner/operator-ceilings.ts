import { TaskValidationError } from "../config/load-task.js";
import { parseMemory } from "../config/task-schema.js";
import { ConfigError } from "../errors.js";
import { configuredModelId, pricingOf, type Prices } from "../model/pricing.js";
import { DEFAULT_RUN_TIMEOUT_SEC } from "../run/run-limits.js";

/**
 * One field an operator caps for untrusted callers (docs/security.md
 * "Ceilings"). `field` is the name `--ceiling` takes and problems name: a
 * task.yaml path (`sandbox.limits.memory`), `agency.<path>` of agency.yaml,
 * or `agent.<path>` of an agent file. `kind`: a number in `unit`, or a size
 * (bytes, written as task.yaml writes sizes: "4g"). `normalDefault`: what the
 * schema gives a field left unset (null: no limit at all). `fillUnset`: false
 * for a budget, which a model without known prices cannot have (the runner
 * refuses it): a task's or agent's `model.max_cost_usd` is filled where the
 * model's prices are known ({@link modelBudget}); an agency's budget stays
 * unset. A trusted default above the ceiling is lowered to it all the same.
 */
interface CeilingField {
  field: string;
  /** Where the field is in the object checked; null for a ceiling on a sum or a request (checked by its own function). */
  path: readonly string[] | null;
  kind: "number" | "size";
  unit: string;
  builtIn: number;
  normalDefault: number | null;
  fillUnset?: false;
}

const GIB = 1024 ** 3;

/**
 * The capped fields and their built-in ceilings: a few times the normal
 * default for what the schema already bounds (cpus 1, memory 1 GiB, pids 256,
 * disk 10 GiB, 50 steps, 4 subagents at once, an agent's 1 invocation at once
 * and 600 s per invocation: src/config/task-schema.ts,
 * src/agency/agency-schema.ts), and a lower one for what is long or
 * unbounded by default (a run's wall clock, 4 h: src/run/run-limits.ts; its
 * model spend; an agency's spend): one hour, 10 USD, 50 USD. A subagent's
 * steps are its own (`subagents.max_steps`), so they have a ceiling too; its
 * time is within the run's. Chosen so a machine of 2–4 cores serving a few callers stays usable;
 * an operator raises or lowers each with `--ceiling FIELD=VALUE`.
 */
const FIELDS: readonly CeilingField[] = [
  { field: "sandbox.limits.cpus", path: ["sandbox", "limits", "cpus"], kind: "number", unit: "cpus", builtIn: 2, normalDefault: 1 },
  { field: "sandbox.limits.memory", path: ["sandbox", "limits", "memory"], kind: "size", unit: "bytes", builtIn: 4 * GIB, normalDefault: GIB },
  { field: "sandbox.limits.pids", path: ["sandbox", "limits", "pids"], kind: "number", unit: "processes", builtIn: 1024, normalDefault: 256 },
  { field: "sandbox.limits.disk", path: ["sandbox", "limits", "disk"], kind: "size", unit: "bytes", builtIn: 20 * GIB, normalDefault: 10 * GIB },
  { field: "timeout_sec", path: ["timeout_sec"], kind: "number", unit: "s", builtIn: 3600, normalDefault: DEFAULT_RUN_TIMEOUT_SEC },
  { field: "max_steps", path: ["max_steps"], kind: "number", unit: "model calls", builtIn: 100, normalDefault: 50 },
  { field: "subagents.max_steps", path: ["subagents", "max_steps"], kind: "number", unit: "model calls", builtIn: 100, normalDefault: 30 },
  { field: "max_parallel", path: ["max_parallel"], kind: "number", unit: "subagents", builtIn: 4, normalDefault: 4 },
  { field: "model.max_cost_usd", path: ["model", "max_cost_usd"], kind: "number", unit: "USD", builtIn: 10, normalDefault: null, fillUnset: false },
  { field: "agency.budget.max_cost_usd", path: ["budget", "max_cost_usd"], kind: "number", unit: "USD", builtIn: 50, normalDefault: null, fillUnset: false },
  { field: "agent.policies.max_concurrency", path: ["policies", "max_concurrency"], kind: "number", unit: "invocations", builtIn: 4, normalDefault: 1 },
  { field: "agent.policies.timeout_seconds", path: ["policies", "timeout_seconds"], kind: "number", unit: "s", builtIn: 3600, normalDefault: 600 },
  // Sums over a request: a batch's tasks at once (`POST /v1/batches` `jobs`), and an agency's invocations at once (the
  // sum of its agents' `policies.max_concurrency`); 4 each, a 2–4 core machine's worth of sandboxes, as max_parallel.
  { field: "batch.jobs", path: null, kind: "number", unit: "tasks at once", builtIn: 4, normalDefault: 1 },
  { field: "agency.max_concurrent_invocations", path: null, kind: "number", unit: "invocations at once", builtIn: 4, normalDefault: 1 },
];

/** The fields a task, agency or agent object carries (not the sums). */
function objectFields(): (CeilingField & { path: readonly string[] })[] {
  return FIELDS.filter((field): field is CeilingField & { path: readonly string[] } => field.path !== null);
}

/** The ceiling of each capped field (see {@link ceilingFields}), in the field's unit (sizes in bytes). */
export type Ceilings = Readonly<Record<string, number>>;

/** One refused field: its path in the object checked (dotted), and a message naming the asked value and the ceiling. */
export interface CeilingProblem {
  path: string;
  message: string;
}

/** The built-in ceilings (docs/security.md "Ceilings"). */
export function builtInCeilings(): Ceilings {
  return Object.fromEntries(FIELDS.map((field) => [field.field, field.builtIn]));
}

/** The names `--ceiling` takes, in order. */
function ceilingFields(): string[] {
  return FIELDS.map((field) => field.field);
}

/**
 * The built-in ceilings with `--ceiling FIELD=VALUE` flags (`values`, as
 * given) over them. Throws ConfigError naming the flag for an unknown field
 * (listing the known ones) or a value that is not a positive number (a size
 * such as "8g" for sizes).
 */
export function parseCeilingFlags(values: readonly string[], flag = "--ceiling"): Ceilings {
  const ceilings: Record<string, number> = { ...builtInCeilings() };
  for (const value of values) {
    const match = /^([\w.]+)=(.+)$/.exec(value.trim());
    const field = FIELDS.find((entry) => entry.field === match?.[1]);
    if (!match || !field) {
      throw new ConfigError(`${flag} ${value}: expected FIELD=VALUE with FIELD one of ${ceilingFields().join(", ")} (docs/security.md "Ceilings")`);
    }
    const parsed = parseValue(field, match[2]!.trim());
    if (parsed === null)
      throw new ConfigError(`${flag} ${value}: expected ${field.kind === "size" ? 'a size such as "4g" or "512m"' : `a number above 0 (${field.unit})`}`);
    ceilings[field.field] = parsed;
  }
  return ceilings;
}

/** One line per ceiling, `field=value`, for the server's start-up note. */
export function describeCeilings(ceilings: Ceilings): string {
  return FIELDS.map((field) => `${field.field}=${show(field, ceilings[field.field] ?? field.builtIn)}`).join(" ");
}

/**
 * Applies the task ceilings to a task object from an untrusted caller.
 * `caller` is the object as the caller sent it (what it asked for);
 * `merged` the same with the server's trusted defaults under it. Returns
 * the problems (each field the caller set above its ceiling, named under
 * `prefix`) and `merged` with each capped field the caller left unset
 * lowered to the ceiling where its default (the defaults file's, else the
 * schema's) is higher or unbounded (but `model.max_cost_usd`: see
 * {@link CeilingField}). A value that does not parse is left for the task
 * schema to name.
 */
export function capTask(caller: unknown, merged: unknown, ceilings: Ceilings, prefix = ""): { problems: CeilingProblem[]; task: unknown } {
  return cap(
    caller,
    merged,
    ceilings,
    objectFields().filter((field) => !field.field.startsWith("agency.") && !field.field.startsWith("agent.")),
    prefix,
  );
}

/** {@link capTask} for agency.yaml's own fields (`budget.max_cost_usd`): the agency object as sent. */
export function capAgency(agency: unknown, ceilings: Ceilings, prefix = ""): { problems: CeilingProblem[]; agency: unknown } {
  const { problems, task } = cap(
    agency,
    agency,
    ceilings,
    objectFields().filter((field) => field.field.startsWith("agency.")),
    prefix,
  );
  return { problems, agency: task };
}

/**
 * {@link capTask} for one agent file's object (`{ agent: {...} }`): its
 * `policies` (`agent.` fields) and, as the task its invocations run, its
 * `sandbox.limits`, `max_steps` and `model.max_cost_usd`.
 */
export function capAgent(file: unknown, ceilings: Ceilings, prefix = "agent."): { problems: CeilingProblem[]; file: unknown } {
  const agent = (file as { agent?: unknown } | null)?.agent;
  if (!isRecord(agent)) return { problems: [], file };
  const fields = objectFields()
    .filter((field) => !field.field.startsWith("agency."))
    .filter((field) => (field.field.startsWith("agent.") ? true : ["sandbox", "model", "max_steps"].includes(field.path[0]!)));
  const { problems, task } = cap(agent, agent, ceilings, fields, prefix);
  const model = (task as Record<string, unknown>).model;
  const asked = isRecord(model) ? model : {};
  // The schema's default provider; a provider or name of the wrong type is the schema's to name.
  const provider = asked.provider ?? "openai";
  if (typeof provider !== "string" || (asked.name !== undefined && typeof asked.name !== "string"))
    return { problems, file: { ...(file as Record<string, unknown>), agent: task } };
  const budget = modelBudget({ provider, name: asked.name as string | undefined, max_cost_usd: asked.max_cost_usd }, ceilings, process.env, prefix);
  problems.push(...budget.problems);
  const capped = budget.fill === undefined ? task : setAt(task as Record<string, unknown>, ["model", "max_cost_usd"], budget.fill);
  return { problems, file: { ...(file as Record<string, unknown>), agent: capped } };
}

/**
 * The `model.max_cost_usd` ceiling applied to a model as it will run
 * (`model` after validation or the caller's raw fields; `environment` the
 * process's, which names a real provider's model when `model.name` does not):
 * `fill` is the ceiling (USD) for an unset budget of a priced model; an
 * unpriced model of a real provider is a problem under `prefix`
 * `model.name`, since no budget could bound its spend. The scripted provider
 * is this runner's own test model and spends nothing, so it passes unpriced.
 * No `model.max_cost_usd` ceiling: nothing to apply.
 */
export function modelBudget(
  model: { provider: string; name?: string | undefined; prices?: Prices | undefined; max_cost_usd?: unknown },
  ceilings: Ceilings,
  environment: NodeJS.ProcessEnv,
  prefix = "",
): { fill?: number; problems: CeilingProblem[] } {
  const ceiling = ceilings["model.max_cost_usd"];
  if (ceiling === undefined) return { problems: [] };
  const pricing = pricingOf(model, configuredModelId(model, environment));
  if (pricing.prices) return model.max_cost_usd === undefined ? { fill: ceiling, problems: [] } : { problems: [] };
  if (model.provider === "scripted") return { problems: [] };
  return {
    problems: [
      {
        path: `${prefix}model.name`,
        message: `${pricing.model === null ? "no model is named" : `the price table has no model ${pricing.model}`}: this server bounds every run's spend (model.max_cost_usd, at most ${ceiling} USD), which needs the model's prices; name a model the price table knows (docs/providers.md), or ask the operator to price it (model.prices in the server's defaults file)`,
      },
    ],
  };
}

/**
 * The `batch.jobs` ceiling on a batch's `jobs` (tasks run at once):
 * a problem at `jobs` when above it.
 */
export function batchCeilingProblems(jobs: number, ceilings: Ceilings): CeilingProblem[] {
  const field = FIELDS.find((entry) => entry.field === "batch.jobs")!;
  const ceiling = ceilings[field.field] ?? field.builtIn;
  return jobs > ceiling ? [{ path: "jobs", message: aboveMessage(field, jobs, jobs, ceiling) }] : [];
}

/**
 * The `agency.max_concurrent_invocations` ceiling on an agency's agents
 * (their files' objects, `{ agent: {...} }`): the sum of their
 * `policies.max_concurrency` (unset: the schema's 1) is how many
 * invocations, each a run with its own sandbox, may run at once. A problem at
 * `agents` naming the sum when above it; a value that does not parse counts
 * as 1 (the agency's schema names it).
 */
export function agencyConcurrencyProblems(agentFiles: readonly unknown[], ceilings: Ceilings): CeilingProblem[] {
  const field = FIELDS.find((entry) => entry.field === "agency.max_concurrent_invocations")!;
  const ceiling = ceilings[field.field] ?? field.builtIn;
  const perAgent = agentFiles.map((file) => {
    const agent = (file as { agent?: unknown } | null)?.agent;
    const value = isRecord(agent) ? valueAt(agent, ["policies", "max_concurrency"]) : undefined;
    return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : 1;
  });
  const total = perAgent.reduce((sum, value) => sum + value, 0);
  if (total <= ceiling) return [];
  return [
    {
      path: "agents",
      message: `its ${perAgent.length} agents may run ${total} invocations at once (the sum of their policies.max_concurrency, unset: 1), above this server's ceiling of ${ceiling} ${field.unit}; lower the agents' policies.max_concurrency or use fewer agents (the operator sets it: --ceiling ${field.field}=VALUE)`,
    },
  ];
}

/** A resume's limits, each replacing the recorded one for this attempt (`runner resume --max-steps …`). */
interface ResumeLimits {
  max_steps?: number | undefined;
  max_cost_usd?: number | undefined;
  timeout_sec?: number | undefined;
}

/** Which recorded task field each resume limit replaces. */
const RESUME_REPLACES: Readonly<Record<string, keyof ResumeLimits>> = {
  max_steps: "max_steps",
  "model.max_cost_usd": "max_cost_usd",
  timeout_sec: "timeout_sec",
};

/**
 * The ceilings applied to a run's recorded task (task.json, a validated task:
 * sizes in bytes) before an untrusted caller resumes it: a run not started
 * under these ceilings (`runner exec`, or before an operator lowered them)
 * must not go on above them. Each recorded field above its ceiling is a
 * problem at `task.<field>` naming the recorded value and the ceiling; an
 * unset one counts as its normal default (a run's wall clock: 4 h). A field
 * the resume itself sets (`limits`: `max_steps`, `max_cost_usd`,
 * `timeout_sec`, checked by {@link resumeCeilingProblems}) replaces the
 * recorded one and is not checked here. A recorded run of a priced real
 * model without `model.max_cost_usd` is a problem too (its spend unbounded)
 * unless the resume gives `max_cost_usd`.
 */
export function recordedTaskCeilingProblems(task: unknown, limits: ResumeLimits, ceilings: Ceilings, environment: NodeJS.ProcessEnv): CeilingProblem[] {
  if (!isRecord(task)) return [];
  const problems: CeilingProblem[] = [];
  for (const field of objectFields().filter((entry) => !entry.field.startsWith("agency.") && !entry.field.startsWith("agent."))) {
    const replacedBy = RESUME_REPLACES[field.field];
    if (replacedBy !== undefined && limits[replacedBy] !== undefined) continue;
    const ceiling = ceilings[field.field] ?? field.builtIn;
    const recorded = valueAt(task, field.path);
    const value = recorded === undefined ? field.normalDefault : parseValue(field, recorded);
    const fix = replacedBy
      ? `give ${replacedBy} in the resume (at most the ceiling)`
      : "resume it on the command line (runner resume), where you are the operator";
    if (value !== null && value > ceiling) {
      problems.push({
        path: `task.${field.field}`,
        message: `the run was recorded with ${recorded === undefined ? `none (the default, ${show(field, value)})` : show(field, value)}, above this server's ceiling of ${show(field, ceiling)}${field.kind === "size" ? ` (${ceiling} bytes)` : ` ${field.unit}`}; ${fix}`,
      });
    } else if (value === null && field.field === "model.max_cost_usd") {
      const model = isRecord(task.model) ? task.model : {};
      const provider = typeof model.provider === "string" ? model.provider : "openai";
      if (provider === "scripted") continue;
      const priced = pricingOf(
        { provider, prices: model.prices as Prices | undefined },
        configuredModelId({ provider, name: typeof model.name === "string" ? model.name : undefined }, environment),
      ).prices;
      if (priced)
        problems.push({
          path: "task.model.max_cost_usd",
          message: `the run was recorded with no budget, and this server bounds every run's spend (at most ${show(field, ceiling)} USD); ${fix}`,
        });
    }
  }
  return problems;
}

/**
 * The ceilings applied to an agency's recorded definition (agency.json's,
 * validated: every default filled) before an untrusted caller's event
 * resumes it: its `budget.max_cost_usd`, each agent's fields as
 * {@link capAgent} checks them (named `agents.<name>.<field>`; a priced
 * model recorded without `model.max_cost_usd` too), and the sum of their
 * concurrency ({@link agencyConcurrencyProblems}).
 */
export function recordedAgencyCeilingProblems(
  definition: { budget?: { max_cost_usd: number } | undefined; agents: readonly { name: string }[] },
  ceilings: Ceilings,
): CeilingProblem[] {
  const recorded = (problem: CeilingProblem): CeilingProblem => ({ path: problem.path, message: problem.message.replace(/^asked /, "recorded with ") });
  const problems = capAgency(definition, ceilings).problems.map(recorded);
  for (const agent of definition.agents) {
    const capped = capAgent({ agent }, ceilings, `agents.${agent.name}.`);
    problems.push(...capped.problems.map(recorded));
    // capAgent fills a priced model's unset budget: a recorded agent without one would spend unbounded.
    const budgetOf = (file: unknown) =>
      valueAt(((file as { agent: Record<string, unknown> }).agent ?? {}) as Record<string, unknown>, ["model", "max_cost_usd"]);
    if (budgetOf(capped.file) !== budgetOf({ agent })) {
      problems.push({
        path: `agents.${agent.name}.model.max_cost_usd`,
        message: `recorded with no budget, and this server bounds every run's spend (model.max_cost_usd, at most ${ceilings["model.max_cost_usd"]} USD); resume it on the command line (runner agency resume), where you are the operator`,
      });
    }
  }
  problems.push(
    ...agencyConcurrencyProblems(
      definition.agents.map((agent) => ({ agent })),
      ceilings,
    ),
  );
  return problems;
}

/**
 * Ceilings of a resume's extra limits (`max_steps` more model calls,
 * `max_cost_usd`, `timeout_sec`): each at most its task field's ceiling.
 */
export function resumeCeilingProblems(limits: { max_steps?: number; max_cost_usd?: number; timeout_sec?: number }, ceilings: Ceilings): CeilingProblem[] {
  const pairs: [keyof typeof limits, string][] = [
    ["max_steps", "max_steps"],
    ["max_cost_usd", "model.max_cost_usd"],
    ["timeout_sec", "timeout_sec"],
  ];
  return pairs.flatMap(([key, name]) => {
    const field = FIELDS.find((entry) => entry.field === name)!;
    const asked = limits[key];
    const ceiling = ceilings[name] ?? field.builtIn;
    return asked !== undefined && asked > ceiling ? [{ path: key, message: aboveMessage(field, asked, asked, ceiling) }] : [];
  });
}

function cap(
  caller: unknown,
  merged: unknown,
  ceilings: Ceilings,
  fields: readonly (CeilingField & { path: readonly string[] })[],
  prefix: string,
): { problems: CeilingProblem[]; task: unknown } {
  if (!isRecord(caller) || !isRecord(merged)) return { problems: [], task: merged };
  const problems: CeilingProblem[] = [];
  let task: Record<string, unknown> = merged;
  for (const field of fields) {
    const ceiling = ceilings[field.field] ?? field.builtIn;
    const path = field.field.startsWith("agency.") || field.field.startsWith("agent.") ? field.field.slice(field.field.indexOf(".") + 1) : field.field;
    const asked = valueAt(caller, field.path);
    if (asked !== undefined) {
      const value = parseValue(field, asked);
      if (value !== null && value > ceiling) problems.push({ path: `${prefix}${path}`, message: aboveMessage(field, asked, value, ceiling) });
      continue;
    }
    const fromDefaults = valueAt(merged, field.path);
    if (field.fillUnset === false) {
      // A budget is never filled here (it needs prices), but a trusted default above the ceiling is lowered.
      const current = fromDefaults === undefined ? null : parseValue(field, fromDefaults);
      if (current !== null && current > ceiling) task = setAt(task, field.path, ceiling);
      continue;
    }
    const current = fromDefaults === undefined ? field.normalDefault : parseValue(field, fromDefaults);
    if (fromDefaults !== undefined && current === null) continue;
    if (current === null || current > ceiling) task = setAt(task, field.path, ceiling);
  }
  return { problems, task };
}

function aboveMessage(field: CeilingField, asked: unknown, value: number, ceiling: number): string {
  const askedText = field.kind === "size" ? `${JSON.stringify(asked)} (${value} bytes)` : `${value}`;
  return `asked ${askedText}, above this server's ceiling of ${show(field, ceiling)}${field.kind === "size" ? ` (${ceiling} bytes)` : ` ${field.unit}`}; ask for at most that (the operator sets it: --ceiling ${field.field}=VALUE)`;
}

function show(field: CeilingField, value: number): string {
  if (field.kind !== "size") return String(value);
  for (const [unit, scale] of [
    ["g", GIB],
    ["m", 1024 ** 2],
    ["k", 1024],
  ] as const)
    if (value % scale === 0) return `${value / scale}${unit}`;
  return String(value);
}

function parseValue(field: CeilingField, value: unknown): number | null {
  if (field.kind === "size") return typeof value === "string" || typeof value === "number" ? parseMemory(value) : null;
  const number = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  return typeof number === "number" && Number.isFinite(number) && number > 0 ? number : null;
}

function valueAt(raw: Record<string, unknown>, path: readonly string[]): unknown {
  let value: unknown = raw;
  for (const key of path) {
    if (!isRecord(value)) return undefined;
    value = value[key];
  }
  return value;
}

/** `raw` with `value` at `path` (copies along the path); a path through a non-object is left alone (the schema names it). */
function setAt(raw: Record<string, unknown>, path: readonly string[], value: number): Record<string, unknown> {
  const [key, ...rest] = path;
  if (rest.length === 0) return { ...raw, [key!]: value };
  const inner = raw[key!];
  if (inner !== undefined && !isRecord(inner)) return raw;
  return { ...raw, [key!]: setAt(inner ?? {}, rest, value) };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A task, agency or resume from an untrusted caller asks for more than the operator's ceilings allow: 403, or an MCP tool error; exit 2. */
export class CeilingExceededError extends TaskValidationError {}
