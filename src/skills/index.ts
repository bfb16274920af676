// Skills (issue 6): what the runner wires into a run.
export { BUILTIN_SKILLS_DIRECTORY, loadSkills, userSkillsDirectory, type LoadSkillsOptions } from "./load-skills.js";
export { SkillSet } from "./skill-set.js";
export { skillCatalog, skillCatalogText, type SkillCatalogEntry } from "./skill-catalog.js";
export { loadSkillTool } from "./load-skill-tool.js";
export { readHostSkills } from "./host-skill-source.js";
export { readWorkspaceSkills, type WorkspaceSkillOptions } from "./workspace-skill-source.js";
export { parseSkillFile } from "./parse-skill-file.js";
export { MAX_SKILL_FILE_BYTES, type ShadowedSkill, type Skill, type SkillProblem, type SkillResource, type SkillSource } from "./skill.js";
