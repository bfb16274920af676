import { posix } from "node:path";
import { WORKSPACE_ROOT, type Sandbox } from "../sandbox/sandbox.js";
// The same bounds as the workspace skills read the same way: the filtered `git ls-tree` output, and each git command (ms).
import { GIT_ENVIRONMENT, GIT_LOCATION_VARIABLES, GIT_TIMEOUT_MS, MAX_TREE_LISTING_BYTES, gitCommand } from "./workspace-skill-source.js";

/**
 * File names of project instructions, in order of precedence within one
 * directory: AGENTS.md (the agents.md convention, Codex), then CLAUDE.md
 * (Claude Code), then GEMINI.md (Gemini CLI). At most one file per directory
 * is used, as Codex does (developers.openai.com/codex/guides/agents-md).
 */
export const INSTRUCTION_FILE_NAMES = ["AGENTS.md", "CLAUDE.md", "GEMINI.md"] as const;
export type InstructionFileName = (typeof INSTRUCTION_FILE_NAMES)[number];

/**
 * Most bytes of instruction text put in the prompt, all files together:
 * Codex's default `project_doc_max_bytes` (32 KiB). The text stays in every
 * request of the run, so it is kept small.
 */
export const MAX_PROJECT_INSTRUCTION_BYTES = 32 * 1024;
/** Most instruction files named in the prompt; past it the rest are only counted. */
const MAX_INSTRUCTION_FILES = 64;

/** One instruction file as report.json's `instructions_files` lists it. */
export interface InstructionFileRecord {
  /** Path relative to the repository's top level, e.g. `AGENTS.md`, `src/api/CLAUDE.md`. */
  path: string;
  /** The file's size in the base commit, bytes. */
  bytes: number;
  /** Bytes of it the prompt holds: `bytes`, fewer when `truncated`, 0 when it did not fit at all. */
  included_bytes: number;
  truncated: boolean;
}

export interface ProjectInstructions {
  /** The system prompt's section (see {@link workspaceAgentSystemPrompt}); "" when there is nothing to say. */
  text: string;
  /** Every instruction file chosen (one per directory), in prompt order, for report.json `instructions_files`. */
  files: InstructionFileRecord[];
  /** What went wrong reading them (the run goes on without them), e.g. for a log line. */
  problems: string[];
}

export interface ProjectInstructionOptions {
  /** The task's sandbox: everything is read through `exec` with git, nothing from the host. */
  sandbox: Sandbox;
  /** The commit the run started from (full object id); only its tree is read, never the working tree. */
  baseCommit: string;
  /** The read-only git directory as the container sees it (as for workspace skills; never a path in /workspace). */
  gitDirectory: string;
  signal?: AbortSignal;
}

/** A chosen file of the tree listing. */
interface Candidate {
  path: string;
  directory: string;
  objectId: string;
  size: number;
}

/**
 * Reads the repository's project instructions from the base commit, inside
 * the sandbox, with read-only git on the read-only git directory (like
 * workspace skills, `readWorkspaceSkills`), so nothing the agent writes during
 * the run is ever loaded by it, its subagents, verification or a resume, and
 * the text is the same bytes for every request of the run.
 *
 * Which files: every directory of the base commit's tree may hold one, the
 * first regular file (not a symlink or submodule) of {@link INSTRUCTION_FILE_NAMES}
 * there; empty files are skipped. The agent's working directory is the
 * repository's top level but it works anywhere below it, so unlike Codex
 * (which walks only from the root to its working directory) every directory
 * counts: the root file first, then deeper ones by depth and path, each
 * labelled with the directory it applies to, and the prompt says that the
 * file nearest to the code being changed wins. Text past
 * {@link MAX_PROJECT_INSTRUCTION_BYTES} in all is cut with a note naming
 * what was left out.
 *
 * Git's own failures become `problems` and no instructions; only a sandbox
 * failure throws (SandboxError). Throws Error for a malformed `baseCommit`
 * or a `gitDirectory` inside /workspace (a programming error).
 */
export async function readProjectInstructions(options: ProjectInstructionOptions): Promise<ProjectInstructions> {
  const { baseCommit } = options;
  if (!/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(baseCommit)) {
    throw new Error(`readProjectInstructions: baseCommit must be a full object id, got ${JSON.stringify(baseCommit)}`);
  }
  const gitDirectory = posix.normalize(options.gitDirectory);
  if (!posix.isAbsolute(gitDirectory) || gitDirectory === WORKSPACE_ROOT || gitDirectory.startsWith(`${WORKSPACE_ROOT}/`)) {
    throw new Error(`readProjectInstructions: gitDirectory must be an absolute path outside ${WORKSPACE_ROOT}, got ${JSON.stringify(options.gitDirectory)}`);
  }
  const git = gitCommand(gitDirectory);
  const none = (problem: string): ProjectInstructions => ({ text: "", files: [], problems: [problem] });
  // grep only narrows the listing (a tab or slash before the name); the exact names are checked below.
  // Its exit 1 (no line matched) is not a failure.
  const listing = await options.sandbox.exec({
    command:
      `unset ${GIT_LOCATION_VARIABLES.join(" ")}; set -o pipefail; ${git} ls-tree -r -l -z --full-tree ${baseCommit} ` +
      `| { grep -z -E '[[:space:]/](${INSTRUCTION_FILE_NAMES.map((name) => name.replace(".", "\\.")).join("|")})$' || [ $? -eq 1 ]; }`,
    env: GIT_ENVIRONMENT,
    timeoutMs: GIT_TIMEOUT_MS,
    maxOutputBytes: MAX_TREE_LISTING_BYTES,
    signal: options.signal,
  });
  if (listing.exitCode !== 0) {
    return none(
      `project instructions: cannot list the base commit ${baseCommit} (git exit ${listing.exitCode ?? listing.signal}): ${listing.stderr.trim().slice(0, 500)}`,
    );
  }
  if (listing.truncated)
    return none(`project instructions: the base commit lists more than ${MAX_TREE_LISTING_BYTES} bytes of instruction file entries; none are loaded`);

  const byDirectory = new Map<string, Map<InstructionFileName, Candidate | null>>();
  for (const record of listing.stdout.split("\0")) {
    const match = /^(\d{6}) (\w+) ([0-9a-f]+) +(-|\d+)\t(.+)$/s.exec(record);
    if (!match) continue;
    const [, mode, type, objectId, size, path] = match;
    const name = posix.basename(path!) as InstructionFileName;
    if (!INSTRUCTION_FILE_NAMES.includes(name)) continue;
    const directory = posix.dirname(path!);
    const names = byDirectory.get(directory) ?? new Map<InstructionFileName, Candidate | null>();
    byDirectory.set(directory, names);
    // A symlink's blob holds a path (never followed); a gitlink is a commit. Neither is read.
    const regular = type === "blob" && (mode === "100644" || mode === "100755") && Number(size) > 0;
    names.set(name, regular ? { path: path!, directory, objectId: objectId!, size: Number(size) } : null);
  }
  const chosen: Candidate[] = [];
  for (const names of byDirectory.values()) {
    const first = INSTRUCTION_FILE_NAMES.map((name) => names.get(name)).find((candidate) => candidate);
    if (first) chosen.push(first);
  }
  chosen.sort((a, b) => depth(a.directory) - depth(b.directory) || compare(a.path, b.path));

  // The budget is spent in prompt order; the first file that does not fit whole is cut, the rest get a note.
  let budget = MAX_PROJECT_INSTRUCTION_BYTES;
  const plan = chosen.map((candidate) => {
    const included = Math.min(candidate.size, budget);
    budget -= included;
    return { candidate, included };
  });
  const toRead = plan.filter((entry) => entry.included > 0);
  const contents = await readBlobPrefixes(
    options,
    git,
    toRead.map(({ candidate, included }) => ({ objectId: candidate.objectId, bytes: included })),
  );
  if ("error" in contents) return none(`project instructions: cannot read them from the base commit ${baseCommit}: ${contents.error}`);

  const sections: string[] = [];
  const leftOut: Candidate[] = [];
  const files: InstructionFileRecord[] = [];
  plan.forEach(({ candidate, included }) => {
    const truncated = included < candidate.size;
    files.push({ path: candidate.path, bytes: candidate.size, included_bytes: 0, truncated });
    if (included === 0) {
      leftOut.push(candidate);
      return;
    }
    const text = wholeCharacters(contents.blobs[toRead.findIndex((entry) => entry.candidate === candidate)]!);
    files[files.length - 1]!.included_bytes = Buffer.byteLength(text);
    const note = truncated
      ? `\n[truncated: the first ${Buffer.byteLength(text)} of ${candidate.size} bytes are shown (project instructions are capped at ${MAX_PROJECT_INSTRUCTION_BYTES} bytes in all); read the rest with read_file ${candidate.path}]`
      : "";
    sections.push(
      `<project_instructions path="${candidate.path}" applies_to="${scope(candidate.directory)}">\n${text.replace(/\n$/, "")}${note}\n</project_instructions>`,
    );
  });
  if (!sections.length) return { text: "", files, problems: [] };
  const named = leftOut.slice(0, MAX_INSTRUCTION_FILES);
  const notes = leftOut.length
    ? [
        `Not included (past the ${MAX_PROJECT_INSTRUCTION_BYTES}-byte cap): ${named.map((candidate) => `${candidate.path} (${candidate.size} bytes)`).join(", ")}` +
          `${leftOut.length > named.length ? ` and ${leftOut.length - named.length} more` : ""}; read the one for a directory with read_file before changing files there.`,
      ]
    : [];
  const text = [
    "Project instructions: the repository's own AGENTS.md files (CLAUDE.md or GEMINI.md where a directory has none), as of the commit this run started from.",
    "Follow them. Each applies to its directory and everything below it; where two disagree, the one nearest to the file you are changing wins. The task's instruction takes precedence over them.",
    ...sections,
    ...notes,
  ].join("\n");
  return { text, files, problems: [] };
}

/** The first `bytes` bytes of each blob, base64 on the wire so no byte is lost to text decoding. */
async function readBlobPrefixes(
  options: { sandbox: Sandbox; signal?: AbortSignal },
  git: string,
  blobs: { objectId: string; bytes: number }[],
): Promise<{ blobs: Buffer[] } | { error: string }> {
  if (!blobs.length) return { blobs: [] };
  for (const blob of blobs) if (!/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(blob.objectId)) return { error: `bad object id ${JSON.stringify(blob.objectId)}` };
  const expected = blobs.reduce((total, blob) => total + Math.ceil(blob.bytes / 3) * 4 + 1, 0);
  // No pipefail: `head` may stop reading a longer blob early (git then gets SIGPIPE). The lengths are checked below.
  const result = await options.sandbox.exec({
    command:
      `unset ${GIT_LOCATION_VARIABLES.join(" ")}; for entry in ${blobs.map((blob) => `${blob.objectId}:${blob.bytes}`).join(" ")}; do ` +
      `${git} cat-file blob "\${entry%:*}" | head -c "\${entry#*:}" | base64 -w 0; echo; done`,
    env: GIT_ENVIRONMENT,
    timeoutMs: GIT_TIMEOUT_MS,
    maxOutputBytes: expected + 1024,
    signal: options.signal,
  });
  if (result.exitCode !== 0 || result.truncated) {
    return {
      error: `exit ${result.exitCode ?? result.signal}${result.truncated ? ", output larger than the sizes listed" : ""}: ${result.stderr.trim().slice(0, 500)}`,
    };
  }
  const lines = result.stdout.split("\n");
  const decoded = blobs.map((_, index) => Buffer.from(lines[index] ?? "", "base64"));
  const mismatch = decoded.findIndex((content, index) => content.length !== blobs[index]!.bytes);
  if (mismatch !== -1) {
    return {
      error: `object ${blobs[mismatch]!.objectId} read as ${decoded[mismatch]!.length} bytes, expected ${blobs[mismatch]!.bytes}: ${result.stderr.trim().slice(0, 500)}`,
    };
  }
  return { blobs: decoded };
}

/** `content` as text without a UTF-8 sequence cut in half at its end (a cut file can end mid-character). */
function wholeCharacters(content: Buffer): string {
  let end = content.length;
  let back = 0;
  while (back < 3 && end - back - 1 >= 0 && (content[end - back - 1]! & 0xc0) === 0x80) back += 1;
  const lead = content[end - back - 1];
  if (lead !== undefined && lead >= 0xc0) {
    const length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
    if (back + 1 < length) end -= back + 1;
  }
  return content.subarray(0, end).toString("utf8");
}

function scope(directory: string): string {
  return directory === "." ? "the whole repository" : `${directory}/`;
}

function depth(directory: string): number {
  return directory === "." ? 0 : directory.split("/").length;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
