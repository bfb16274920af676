import { existsSync } from "node:fs";
import { join } from "node:path";
import { rawSafeGit } from "./safe-git.js";

/** Name and email of agent-runner as a git identity: the author when the user has none, and the co-author otherwise. */
const RUNNER_IDENTITY = { name: "agent-runner", email: "agent-runner@localhost" } as const;

/**
 * Who a run's commits are by: the user's git identity as author and
 * committer (or {@link RUNNER_IDENTITY} when the user has none: `source`
 * `runner`), and the `Co-authored-by:` trailer naming agent-runner and the
 * model, as Claude Code credits itself. Recorded in run.json so that a later
 * start commits a dead run's work the same way.
 */
export interface CommitAuthorship {
  name: string;
  email: string;
  /** Where the identity came from: the repository's config, the user's global git config, or none (agent-runner's). */
  source: "repository" | "user" | "runner";
  /** The trailer line, e.g. `Co-authored-by: agent-runner (gpt-4.1) <agent-runner@localhost>`. */
  coAuthoredBy: string;
}

/**
 * The authorship of a run's commits in the repository at `repositoryRoot`:
 * `user.name` and `user.email` as git would take them, each from the
 * repository's own config, else the user's global config
 * (`$XDG_CONFIG_HOME/git/config`, default `~/.config/git/config`, then
 * `~/.gitconfig`, which wins, as in git), HOME and XDG_CONFIG_HOME from
 * `environment`. Read safely: only those files (no system config, no
 * `include`/`includeIf`: `--no-includes`), through host git that runs no
 * program (src/workspace/safe-git.ts), and a value git would refuse (angle
 * brackets, a line break, empty) counts as absent. Without both a name and an
 * email the run's commits are agent-runner's. `model` names the model in the
 * trailer (`null`: the provider, e.g. `scripted`). Never throws: git that
 * cannot read a file counts as no identity there.
 */
export async function commitAuthorship(repositoryRoot: string, environment: NodeJS.ProcessEnv, model: string): Promise<CommitAuthorship> {
  const coAuthoredBy = `Co-authored-by: ${RUNNER_IDENTITY.name} (${oneLine(model)}) <${RUNNER_IDENTITY.email}>`;
  const repository = ["--local"];
  const home = environment.HOME;
  const xdg = environment.XDG_CONFIG_HOME || (home ? join(home, ".config") : undefined);
  // Lowest precedence first, as git reads them.
  const userFiles = [xdg ? join(xdg, "git", "config") : null, home ? join(home, ".gitconfig") : null].filter(
    (file): file is string => file !== null && existsSync(file),
  );
  const read = async (key: string): Promise<{ value: string; source: "repository" | "user" } | null> => {
    const local = await configValue(repositoryRoot, repository, key);
    if (local !== null) return { value: local, source: "repository" };
    let found: string | null = null;
    for (const file of userFiles) found = (await configValue(repositoryRoot, ["--file", file], key)) ?? found;
    return found === null ? null : { value: found, source: "user" };
  };
  const [name, email] = await Promise.all([read("user.name"), read("user.email")]);
  if (!name || !email) return { ...RUNNER_IDENTITY, source: "runner", coAuthoredBy };
  return { name: name.value, email: email.value, source: name.source === "repository" && email.source === "repository" ? "repository" : "user", coAuthoredBy };
}

/** The `-c` settings that make host git commit as `authorship` (author and committer). */
export function authorshipConfig(authorship: Pick<CommitAuthorship, "name" | "email">): string[] {
  return [`user.name=${authorship.name}`, `user.email=${authorship.email}`];
}

/** `message` with the co-author trailer as its last paragraph (git's trailer format). */
export function withCoAuthor(message: string, authorship: Pick<CommitAuthorship, "coAuthoredBy">): string {
  return `${message.trimEnd()}\n\n${authorship.coAuthoredBy}`;
}

/**
 * The authorship recorded in a run.json, or null when it is absent or not
 * what {@link commitAuthorship} writes (a record the runner did not write
 * gets agent-runner's identity, never arbitrary `-c` values).
 */
export function recordedAuthorship(value: unknown): CommitAuthorship | null {
  if (typeof value !== "object" || value === null) return null;
  const { name, email, source, coAuthoredBy } = value as Record<string, unknown>;
  if (typeof name !== "string" || !validIdentityPart(name) || typeof email !== "string" || !validIdentityPart(email)) return null;
  if (source !== "repository" && source !== "user" && source !== "runner") return null;
  if (typeof coAuthoredBy !== "string" || !/^Co-authored-by: agent-runner \([^\n]*\) <agent-runner@localhost>$/.test(coAuthoredBy)) return null;
  return { name, email, source, coAuthoredBy };
}

/** One value of `key` from the config `scope` names, or null (absent, unreadable, or one git would refuse as an identity). */
async function configValue(repositoryRoot: string, scope: string[], key: string): Promise<string | null> {
  const value = await rawSafeGit({ baseDirectory: repositoryRoot }, ["config", ...scope, "--no-includes", "--get", key]).catch(() => null);
  const trimmed = value?.replace(/\n$/, "").trim() ?? "";
  return validIdentityPart(trimmed) ? trimmed : null;
}

/** What git accepts in an identity: not empty, no angle brackets, no line break or NUL. */
function validIdentityPart(value: string): boolean {
  return value.length > 0 && value.length <= 256 && !/[<>\n\r\0]/.test(value);
}

function oneLine(text: string): string {
  return (
    text
      .replace(/[\s()<>]+/g, " ")
      .trim()
      .slice(0, 100) || "unknown model"
  );
}
