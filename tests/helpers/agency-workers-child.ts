/**
 * An orchestrator process whose agency's invocations run on NATS workers, to
 * be killed: starts the agency of argv[3] with RUNNER_HOME argv[2] and its
 * invocations on pool argv[5] at servers argv[4] (NatsInvocations), prints
 * `agency <id>`, and waits for the agency's end, which the test never lets
 * come (it sends SIGKILL). Run with `node --import tsx`
 * (tests/integration/agency-workers.test.ts).
 */
import { connect } from "@nats-io/transport-node";
import { createRunner } from "../../src/agency/agency.js";
import { HostDirectorySandboxProvider } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { NatsInvocations } from "../../src/worker/nats-invocations.js";
import { WorkQueue } from "../../src/worker/work-queue.js";
import { fakeTierEnvironment } from "./fake-runner.js";

const [home, agencyFile, servers, pool] = process.argv.slice(2);
if (!home || !agencyFile || !servers || !pool) throw new Error("usage: agency-workers-child.ts <runner-home> <agency.yaml> <servers> <pool>");

const runner = await createRunner({ home, sandboxProvider: new HostDirectorySandboxProvider(), environment: fakeTierEnvironment(home) });
const connection = await connect({ servers: servers.split(","), maxReconnectAttempts: -1 });
const executor = await NatsInvocations.open(await WorkQueue.open(connection, { pool }), home);
const agency = await runner.agency(agencyFile, { executor });
process.stdout.write(`agency ${agency.id}\n`);
await agency.result;
