import type { SkillSource } from "./skill.js";
import type { SkillSet } from "./skill-set.js";

/** One line of the catalog. */
export interface SkillCatalogEntry {
  name: string;
  description: string;
  source: SkillSource;
}

/** The skills the model may load, sorted by name: name, description and source (source is for the runner's records, not the prompt). */
export function skillCatalog(skills: SkillSet): SkillCatalogEntry[] {
  return skills.skills.map(({ name, description, source }) => ({ name, description, source }));
}

/**
 * The system prompt's skills section: an introduction and one line
 * `- <name>: <description>` per skill, sorted by name. Byte-stable: the same
 * skills give the same text (no sources, paths, sizes or counts), so the
 * prompt prefix stays cacheable. Empty string when there are no skills (then
 * add nothing to the prompt, and leave `load_skill` out too).
 */
export function skillCatalogText(skills: SkillSet | SkillCatalogEntry[]): string {
  const entries = Array.isArray(skills) ? [...skills].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) : skillCatalog(skills);
  if (!entries.length) return "";
  return [
    "Skills (playbooks for recurring kinds of work): when one fits what you are about to do, call load_skill with its name first and follow it.",
    ...entries.map((entry) => `- ${entry.name}: ${entry.description.replace(/\s+/g, " ").trim()}`),
  ].join("\n");
}
