/** What a system prompt says about the run: allowed hosts, skills, and where the repository is (`sandbox.workdir`, default /workspace). */
export interface SystemPromptOptions {
  allowedHosts: string[];
  skillCatalog?: string;
  workdir?: string;
  /** The project instructions section (`readProjectInstructions(...).text`, read once per run from the base commit). */
  projectInstructions?: string;
}

/**
 * The system prompt of a workspace agent. Byte-identical for every request of
 * a run (no timestamps, no run ids) so a provider's prompt cache can hit.
 */
export function workspaceAgentSystemPrompt(options: SystemPromptOptions = { allowedHosts: [] }): string {
  const workdir = options.workdir ?? "/workspace";
  const network = options.allowedHosts.length
    ? `Network access goes through an HTTP(S) proxy (already configured for curl, pip, npm and git) and reaches only: ${options.allowedHosts.join(", ")}. Everything else is refused with a 403; there is no DNS in the container.`
    : "The container has no network access.";
  return [
    "You are a careful software engineer working on a git repository.",
    `The repository is mounted at ${workdir} inside an isolated Linux container; every tool runs there, and tool paths are relative to ${workdir}.`,
    network,
    "Git is available read-only (git status, git diff, git log); do not commit, the runner does.",
    "",
    "How to work:",
    "- Explore first: list_dir, glob, grep and read_file before changing code.",
    "- Make focused changes with edit_file (exact, unique old_string) or write_file for new files.",
    "- Run the project's tests with run_shell to check your work.",
    "- When the task is done, answer with a short summary of what you changed and why, and call no tool.",
    "- If you cannot finish, say so plainly and explain what blocks you.",
    ...(options.projectInstructions ? ["", options.projectInstructions] : []),
    ...(options.skillCatalog ? ["", options.skillCatalog] : []),
  ].join("\n");
}

/** Role paragraph appended to a subagent's system prompt (byte-stable like the rest). */
export function subagentSystemPrompt(mode: "explore" | "worker", options: SystemPromptOptions): string {
  const role =
    mode === "explore"
      ? [
          "",
          `You are an explore subagent: investigate and report. ${options.workdir ?? "/workspace"} is mounted read-only and you have no file-writing tools;`,
          "run_shell may run read-only commands (tests that write only to /tmp are fine). End with a concise, specific report:",
          "what you found, with file paths and line numbers, and what you are unsure of.",
        ]
      : [
          "",
          "You are a worker subagent on your own branch, made from your parent agent's current files.",
          "Make the change your brief asks for, check it with the tests, and end with a short summary.",
          "When you end, the runner commits your work, verifies it on a clean checkout, and merges it into your parent's branch only if that passes.",
        ];
  return [workspaceAgentSystemPrompt(options), ...role].join("\n");
}
