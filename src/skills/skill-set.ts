import { SKILL_SOURCES, type ShadowedSkill, type Skill, type SkillProblem, type SkillSource, type SkillSourceResult } from "./skill.js";

/**
 * The skills of a run, after precedence: one skill per name, taken from the
 * first source in {@link SKILL_SOURCES} order that defines it (built-in, then
 * the user's directory, then the workspace's base commit). The losers are
 * listed in `shadowed`, never silently dropped; invalid skills are in
 * `problems`. Immutable; `skills` is sorted by name (code-unit order, the
 * same in every locale).
 */
export class SkillSet {
  readonly skills: readonly Skill[];
  readonly shadowed: readonly ShadowedSkill[];
  readonly problems: readonly SkillProblem[];
  private readonly byName: Map<string, Skill>;

  private constructor(skills: Skill[], shadowed: ShadowedSkill[], problems: SkillProblem[]) {
    this.skills = skills;
    this.shadowed = shadowed;
    this.problems = problems;
    this.byName = new Map(skills.map((skill) => [skill.name, skill]));
  }

  /** Merges what each source yielded; the order of `results` does not matter, precedence is by source. */
  static fromSources(results: SkillSourceResult[]): SkillSet {
    const all = results.flatMap((result) => result.skills);
    const rank = (source: SkillSource) => SKILL_SOURCES.indexOf(source);
    const ordered = [...all].sort((a, b) => rank(a.source) - rank(b.source) || compare(a.name, b.name));
    const winners = new Map<string, Skill>();
    const shadowed: ShadowedSkill[] = [];
    for (const skill of ordered) {
      const winner = winners.get(skill.name);
      if (winner) shadowed.push({ name: skill.name, source: skill.source, location: skill.location, shadowedBy: winner.source });
      else winners.set(skill.name, skill);
    }
    const skills = [...winners.values()].sort((a, b) => compare(a.name, b.name));
    return new SkillSet(
      skills,
      shadowed,
      results.flatMap((result) => result.problems),
    );
  }

  static empty(): SkillSet {
    return new SkillSet([], [], []);
  }

  get(name: string): Skill | undefined {
    return this.byName.get(name);
  }

  /** The other definitions of `name` that lost to the one used. */
  shadowedCopies(name: string): ShadowedSkill[] {
    return this.shadowed.filter((entry) => entry.name === name);
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
