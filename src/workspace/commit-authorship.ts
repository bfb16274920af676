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
  /** Where the identity came from: the repository's config, the user's global git config (or, below it, the system's), or none (agent-runner's). */
  source: "repository" | "user" | "runner";
  /** The trailer line, e.g. `Co-authored-by: agent-runner (gpt-4.1) <agent-runner@localhost>`. */
  coAuthoredBy: string;
}

/**
 * The authorship of a run's commits in the repository at `repositoryRoot`:
 * `user.name` and `user.email` as git would take them, each from the
 * repository's own config, else the user's global config
 * (`$XDG_CONFIG_HOME/git/config`, default `~/.config/git/config`, then
 * `~/.gitconfig`, which wins, as in git), else the system config
 * (`GIT_CONFIG_SYSTEM`, default `/etc/gitconfig`; none with
 * `GIT_CONFIG_NOSYSTEM`, as git-config(1) says), HOME, XDG_CONFIG_HOME and
 * the GIT_CONFIG_* variables from `environment`. Read safely: only those
 * files (no `include`/`includeIf`: `--no-includes`), through host git that runs no
 * program (src/workspace/safe-git.ts), and a value git would refuse (angle
 * brackets, a line break, empty) counts as absent. Without both a name and an
 * email the run's commits are agent-runner's. `model` names the model in the
 * trailer (`null`: the provider, e.g. `scripted`). Never throws: git that
 * cannot read a file counts as no identity there.
 */
export async function commitAuthorship(repositoryRoot: string, environment: NodeJS.ProcessEnv, model: string): Promise<CommitAuthorship> {
  const coAuthoredBy = `Co-authored-by: ${RUNNER_IDENTITY.name} (${oneLine(model)}) <${RUNNER_IDENTITY.email}>`;
  const home = environment.HOME;
  const xdg = environment.XDG_CONFIG_HOME || (home ? join(home, ".config") : undefined);
  const system = /^(1|true|yes|on)$/i.test(environment.GIT_CONFIG_NOSYSTEM ?? "") ? null : environment.GIT_CONFIG_SYSTEM || "/etc/gitconfig";
  // Lowest precedence first, as git reads them (the system's counts as the user's: a machine's shared identity).
  const userFiles = [system, xdg ? join(xdg, "git", "config") : null, home ? join(home, ".gitconfig") : null].filter(
    (file): file is string => file !== null && existsSync(file),
  );
  // One git call per file, all at once (each is ~30 ms of process start on a loaded machine).
  const [local, ...users] = await Promise.all([
    identityIn(repositoryRoot, ["--local"]),
    ...userFiles.map((file) => identityIn(repositoryRoot, ["--file", file])),
  ]);
  const read = (key: "user.name" | "user.email"): { value: string; source: "repository" | "user" } | null => {
    const own = local!.get(key);
    if (own !== undefined) return { value: own, source: "repository" };
    const found = users.reduce<string | undefined>((value, file) => file.get(key) ?? value, undefined);
    return found === undefined ? null : { value: found, source: "user" };
  };
  const [name, email] = [read("user.name"), read("user.email")];
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

/** `user.name` and `user.email` of the config `scope` names, the last of each (as git takes it), without values git would refuse as an identity; empty when absent or unreadable. */
async function identityIn(repositoryRoot: string, scope: string[]): Promise<Map<string, string>> {
  const listing = await rawSafeGit({ baseDirectory: repositoryRoot }, [
    "config",
    ...scope,
    "--no-includes",
    "-z",
    "--get-regexp",
    "^user\\.(name|email)$",
  ]).catch(() => "");
  const values = new Map<string, string>();
  for (const record of listing.split("\0")) {
    const newline = record.indexOf("\n");
    if (newline < 0) continue;
    const value = record.slice(newline + 1).trim();
    if (validIdentityPart(value)) values.set(record.slice(0, newline), value);
    else values.delete(record.slice(0, newline));
  }
  return values;
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
