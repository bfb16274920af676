// Skills (issue 6): what the runner wires into a run.
export { BUILTIN_SKILLS_DIRECTORY, loadSkills, userSkillsDirectory, type LoadSkillsOptions } from "./load-skills.js";
export { SkillSet } from "./skill-set.js";
export { skillCatalog, skillCatalogText, type SkillCatalogEntry } from "./skill-catalog.js";
export { loadSkillTool, skillText, SKILL_FILE_RESULT_PREFIX } from "./load-skill-tool.js";
export { readHostSkills } from "./host-skill-source.js";
export { readWorkspaceSkills, WORKSPACE_SKILLS_DIRECTORY, type WorkspaceSkillOptions } from "./workspace-skill-source.js";
export { parseSkillFile, isValidSkillName, skillFrontMatterSchema } from "./parse-skill-file.js";
export {
  MAX_SKILL_FILE_BYTES,
  MAX_SKILL_RESOURCE_BYTES,
  MAX_SKILL_RESOURCES,
  MAX_SKILLS_PER_SOURCE,
  SKILL_SOURCES,
  describeSkillSource,
  type ShadowedSkill,
  type Skill,
  type SkillProblem,
  type SkillResource,
  type SkillSource,
} from "./skill.js";
