/**
 * A runner process of the Docker-free tier that dies: it starts the task
 * given as argv[3] with RUNNER_HOME argv[2] over the host-directory provider,
 * prints the run id, and kills itself with SIGKILL (no clean-up, no report)
 * when the agent runs the command argv[4]; other commands go to {@link fakeShell}.
 * Run with `node --import tsx` (tests/unit/run/fake-tier-resume.test.ts).
 */
import { createRunner } from "../../src/runner/runner.js";
import { HostDirectorySandboxProvider } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { fakeShell, fakeTierEnvironment } from "./fake-runner.js";

const [home, task, dieAt] = process.argv.slice(2);
if (!home || !task || !dieAt) throw new Error("usage: fake-runner-child.ts <runner-home> <task.yaml> <command to die at>");

const shell = fakeShell();
const provider = new HostDirectorySandboxProvider({
  exec: (exec) => {
    if (exec.request.command === dieAt) process.kill(process.pid, "SIGKILL");
    return shell(exec);
  },
});
const runner = await createRunner({ home, sandboxProvider: provider, environment: fakeTierEnvironment(home) });
const run = await runner.start(task);
process.stdout.write(`${run.id}\n`);
// Reaching the end means the command never came: the parent sees an exit instead of SIGKILL.
await run.result;
