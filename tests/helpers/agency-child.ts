/**
 * An agency process of the Docker-free tier that dies: it starts the agency
 * of argv[3] with RUNNER_HOME argv[2] over the host-directory provider,
 * prints `agency <id>`, and kills itself with SIGKILL (no clean-up, no
 * report, no ack) when an agent runs the command argv[4]; other commands go
 * to the fake shell. Run with `node --import tsx` (tests/unit/agency/agency-crash.test.ts).
 */
import { createRunner } from "../../src/agency/agency.js";
import { HostDirectorySandboxProvider } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { fakeShell, fakeTierEnvironment } from "./fake-runner.js";

const [home, agencyFile, dieAt] = process.argv.slice(2);
if (!home || !agencyFile || !dieAt) throw new Error("usage: agency-child.ts <runner-home> <agency.yaml> <command to die at>");

const shell = fakeShell();
const provider = new HostDirectorySandboxProvider({
  exec: (exec) => {
    if (exec.request.command === dieAt) process.kill(process.pid, "SIGKILL");
    return shell(exec);
  },
});
const runner = await createRunner({ home, sandboxProvider: provider, environment: fakeTierEnvironment(home) });
const agency = await runner.agency(agencyFile);
process.stdout.write(`agency ${agency.id}\n`);
// Reaching the end means the command never came: the parent sees an exit instead of SIGKILL.
await agency.result;
