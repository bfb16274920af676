/**
 * Runs the runner's own host commit in a child process, so a test can run it
 * as another (non-root) user: creates a run worktree of `<repository>` at
 * `<worktree>`, runs `<shell command>` in it (standing in for the agent), then
 * commitRunWorktree, and prints the outcome as JSON (or `{"error": ...}`).
 * Usage: tsx commit-worktree-cli.ts <repository> <worktree> <shell command>
 */
import { execFileSync } from "node:child_process";
import { commitRunWorktree, createRunWorktree } from "../../src/workspace/run-worktree.js";

const [repository, path, command] = process.argv.slice(2);
const worktree = await createRunWorktree(repository!, { runId: "as-runner", taskSlug: "test" }, path!);
execFileSync("bash", ["-c", command!], { cwd: worktree.path });
try {
  const outcome = await commitRunWorktree(worktree, "agent-runner: test commit");
  process.stdout.write(JSON.stringify({ ...outcome, branch: worktree.branch }));
} catch (error) {
  process.stdout.write(JSON.stringify({ error: (error as Error).message }));
}
