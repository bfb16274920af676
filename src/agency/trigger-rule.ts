import type { AgencyEvent } from "../bus/event-bus.js";
import { triggerMatches } from "./agency-event.js";

/** A JSON scalar a trigger condition compares with. */
type ConditionValue = string | number | boolean | null;

/**
 * One trigger of an agent file: an event pattern (see triggerMatches) and an
 * optional condition on the event's `data`: each key a dotted path
 * (`output.verdict`), each value the scalar found there must equal, or a list
 * it must be one of. So a pipeline routes on an agent's structured output:
 * `{ event: agency.invocation.finished, when: { agent: reviewer, output.verdict: changes_requested } }`.
 */
export interface TriggerRule {
  event: string;
  when?: Record<string, ConditionValue | ConditionValue[]>;
}

/**
 * Whether an agent with these triggers takes `event`: some trigger's pattern
 * matches its type and every key of that trigger's `when` holds on its data.
 * A path that is absent (or runs through a non-object) holds for no value,
 * not even null. `patterns` is the flat list agency records written before
 * conditions existed carry.
 */
export function triggeredBy(agent: { triggers: string[]; triggerRules?: TriggerRule[] }, event: Pick<AgencyEvent, "type" | "data">): boolean {
  const rules: TriggerRule[] = agent.triggerRules ?? agent.triggers.map((pattern) => ({ event: pattern }));
  return rules.some((rule) => triggerMatches(rule.event, event.type) && conditionHolds(rule.when, event.data));
}

function conditionHolds(when: TriggerRule["when"], data: unknown): boolean {
  if (when === undefined) return true;
  return Object.entries(when).every(([path, expected]) => {
    const found = valueAt(data, path);
    if (!found.present) return false;
    return Array.isArray(expected) ? expected.some((value) => value === found.value) : expected === found.value;
  });
}

function valueAt(data: unknown, path: string): { present: true; value: unknown } | { present: false } {
  let current = data;
  for (const key of path.split(".")) {
    if (typeof current !== "object" || current === null || Array.isArray(current) || !Object.hasOwn(current, key)) return { present: false };
    current = (current as Record<string, unknown>)[key];
  }
  return { present: true, value: current };
}
