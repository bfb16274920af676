import { z } from "zod";
import { SKILL_RESULT_PREFIX } from "../agent/context-window.js";
import { defineTool, toolError, type Tool } from "../tools/define-tool.js";
import { describeSkillSource, type Skill } from "./skill.js";
import type { SkillSet } from "./skill-set.js";

/**
 * Start of a skill file's result. Deliberately not {@link SKILL_RESULT_PREFIX}:
 * a skill's other files may be long, so they are ordinary results that
 * clearing may remove (the model can load them again).
 */
const SKILL_FILE_RESULT_PREFIX = "[skill file]";

/** Same test as git's: a NUL in the first 8000 bytes means binary. */
const BINARY_SNIFF_BYTES = 8000;

/** `load_skill`'s arguments (also what src/runner/check-script.ts checks a script's calls against). */
export const loadSkillInput = z.strictObject({
  name: z.string().min(1).describe("The skill's name, exactly as listed under Skills"),
  file: z.string().min(1).optional().describe("One of the skill's other files, by the path its listing gives"),
});

/**
 * The `load_skill` tool over a run's skills. `{name}` returns
 * `[skill] <name>\n<body>` and, when the skill has other files, their list
 * with how to read them; the loop never clears a `[skill]` result and carries
 * it verbatim through compaction, and it stays under the per-result cap as
 * long as SKILL.md stays under MAX_SKILL_FILE_BYTES. `{name, file}` returns
 * one of those files as `[skill file] <name>/<file>\n<text>` (an ordinary
 * result). An unknown name is an `Error:` listing the available names. The
 * description names no skill, so the tool list stays byte-identical whatever
 * skills a run has.
 */
export function loadSkillTool(skills: SkillSet): Tool {
  return defineTool({
    name: "load_skill",
    readOnly: true,
    description:
      "Load a skill: a short playbook for a kind of work, listed by name under Skills in the system prompt. " +
      "Returns its instructions; follow them. With `file`, returns one of the other files the skill lists instead.",
    input: loadSkillInput,
    async execute(input, context) {
      const skill = skills.get(input.name);
      if (!skill) {
        const names = skills.skills.map((entry) => entry.name);
        return toolError(`no skill named "${input.name}". ${names.length ? `Available skills: ${names.join(", ")}.` : "No skills are available in this run."}`);
      }
      if (input.file === undefined) {
        return { content: skillText(skills, skill), details: { skill: skill.name, source: skill.source, location: skill.location } };
      }
      if (!skill.resources.some((resource) => resource.path === input.file)) {
        const listed = skill.resources.map((resource) => resource.path);
        return toolError(`skill ${skill.name} has no file "${input.file}". ${listed.length ? `Its files: ${listed.join(", ")}.` : "It has no other files."}`);
      }
      const read = await skill.readResource(input.file, { sandbox: context.sandbox, signal: context.signal });
      if ("error" in read) return toolError(`cannot read ${skill.name}/${input.file}: ${read.error}`);
      if (read.content.subarray(0, BINARY_SNIFF_BYTES).includes(0)) {
        return toolError(`${skill.name}/${input.file} is a binary file (${read.content.length} bytes); load_skill returns text only`);
      }
      return {
        content: `${SKILL_FILE_RESULT_PREFIX} ${skill.name}/${input.file}\n${read.content.toString("utf8")}`,
        details: { skill: skill.name, file: input.file, source: skill.source, bytes: read.content.length },
      };
    },
  });
}

/** What `load_skill {name}` returns (exported for tests and the terminal view). */
function skillText(skills: SkillSet, skill: Skill): string {
  const parts = [`${SKILL_RESULT_PREFIX} ${skill.name}\n${skill.body}`];
  if (skill.resources.length) {
    parts.push(
      [
        `Other files of this skill (read one with load_skill {"name": ${JSON.stringify(skill.name)}, "file": "<path>"}):`,
        ...skill.resources.map((resource) => `- ${resource.path} (${formatSize(resource.size)})`),
        ...(skill.resourcesOmitted ? [`- ... and ${skill.resourcesOmitted} more, not listed`] : []),
      ].join("\n"),
    );
  }
  for (const copy of skills.shadowedCopies(skill.name)) {
    parts.push(
      `Note: the ${describeSkillSource(copy.source)} also has a skill named ${skill.name} (${copy.location}); it is not used, the ${describeSkillSource(skill.source)} one takes precedence.`,
    );
  }
  return parts.join("\n\n");
}

function formatSize(bytes: number): string {
  return bytes < 1024 ? `${bytes} bytes` : `${(bytes / 1024).toFixed(1)} KiB`;
}
