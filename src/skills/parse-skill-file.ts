import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { MAX_SKILL_FILE_BYTES } from "./skill.js";

/** Longest skill name, characters. */
const MAX_SKILL_NAME_LENGTH = 64;
/** Longest description, characters (after whitespace is collapsed). */
const MAX_SKILL_DESCRIPTION_LENGTH = 1024;

const NAME_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** Whether `name` is a valid skill name: lower-case letters, digits and single inner hyphens. */
export function isValidSkillName(name: string): boolean {
  return name.length <= MAX_SKILL_NAME_LENGTH && NAME_PATTERN.test(name);
}

const requiredString = (what: string) => z.string({ error: (issue) => (issue.input === undefined ? `is required (${what})` : `must be a string (${what})`) });

/**
 * The front matter of a SKILL.md. `name` and `description` are ours; `license`
 * and `metadata` are accepted (and ignored) for compatibility with skills
 * written for other agents. Anything else is refused, so a misspelt key is
 * reported instead of silently dropped.
 */
const skillFrontMatterSchema = z.strictObject({
  name: requiredString("the skill's directory name")
    .max(MAX_SKILL_NAME_LENGTH, `must be at most ${MAX_SKILL_NAME_LENGTH} characters`)
    .regex(NAME_PATTERN, "must use only a-z, 0-9 and single hyphens between them, e.g. run-the-tests-first"),
  description: requiredString("one paragraph: what the skill does and when to use it")
    .transform(collapseWhitespace)
    .pipe(
      z
        .string()
        .min(1, "must not be empty: say what the skill does and when to use it")
        .max(MAX_SKILL_DESCRIPTION_LENGTH, `must be at most ${MAX_SKILL_DESCRIPTION_LENGTH} characters`),
    ),
  license: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

const ALLOWED_KEYS = Object.keys(skillFrontMatterSchema.shape).join(", ");

export interface ParsedSkillFile {
  name: string;
  description: string;
  body: string;
}

/**
 * Parses and validates a SKILL.md: `---` front matter (YAML) with `name`
 * equal to `directoryName` and a `description`, then a non-empty Markdown
 * body. `size` is the whole file's size when only its start was read.
 * Returns the skill, or every problem found as one message that starts
 * with `location` (the file, as the user should look for it).
 */
export function parseSkillFile(content: Buffer, location: string, directoryName: string, size = content.length): ParsedSkillFile | { error: string } {
  const fail = (problems: string[]) => ({
    error: problems.length === 1 ? `${location}: ${problems[0]}` : `${location}:\n${problems.map((problem) => `  - ${problem}`).join("\n")}`,
  });
  if (size > MAX_SKILL_FILE_BYTES || content.length > MAX_SKILL_FILE_BYTES) {
    return fail([
      `is ${Math.max(size, content.length)} bytes; a SKILL.md may have at most ${MAX_SKILL_FILE_BYTES} (loaded skills stay in the context for the whole run: keep the body short and move reference material to other files of the skill)`,
    ]);
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(content);
  } catch {
    return fail(["is not UTF-8 text"]);
  }
  text = text.replace(/^\uFEFF/, "").replace(/\r\n?/g, "\n");
  const match = /^---[ \t]*\n(?:([\s\S]*?)\n)?---[ \t]*(?:\n|$)/.exec(text);
  if (!match) {
    return fail([
      `must start with YAML front matter between two "---" lines, e.g.\n---\nname: ${isValidSkillName(directoryName) ? directoryName : "my-skill"}\ndescription: What it does and when to use it.\n---`,
    ]);
  }
  let raw: unknown;
  try {
    raw = parseYaml(match[1] ?? "");
  } catch (error) {
    const message = (error as Error).message.split("\n")[0];
    const hint = /mapping/i.test(message ?? "") ? ' (put a value that contains ": " in quotes)' : "";
    return fail([`front matter is not valid YAML: ${message}${hint}`]);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return fail(["front matter must be a YAML mapping with name and description"]);
  }
  const problems: string[] = [];
  const parsed = skillFrontMatterSchema.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      if (issue.code === "unrecognized_keys") {
        problems.push(
          `front matter: unknown key${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((key) => JSON.stringify(key)).join(", ")} (allowed: ${ALLOWED_KEYS})`,
        );
      } else {
        problems.push(`front matter: ${issue.path.map(String).join(".") || "(top)"}: ${issue.message}`);
      }
    }
  } else if (parsed.data.name !== directoryName) {
    problems.push(`front matter: name "${parsed.data.name}" must equal the skill's directory name "${directoryName}"`);
  }
  const body = text.slice(match[0].length).trim();
  if (!body) problems.push("has no instructions after the front matter (the Markdown body is empty)");
  if (problems.length || !parsed.success) return fail(problems);
  return { name: parsed.data.name, description: parsed.data.description, body };
}

/** Whitespace runs (newlines included) become one space; control characters are dropped. */
function collapseWhitespace(text: string): string {
  return text
    .replace(/[\u0000-\u0008\u000e-\u001f\u007f]/g, "")
    .replace(/\s+/g, " ")
    .trim();
}
