// run-task.ts and agents/subagents.ts still import verifyCommit from here; both move to ../deliver/verify-commit.js with the shared deliver lifecycle.
export { verifyCommit } from "../deliver/verify-commit.js";
