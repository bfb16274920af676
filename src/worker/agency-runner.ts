import { hostname } from "node:os";
import { createRunner as createAgencyRunner, type AgencyRunner, type AgencyRunnerOptions } from "../agency/agency.js";
import { ConfigError, errorMessage, SandboxError } from "../errors.js";
import { createLogger } from "../logging/logger.js";
import { connectNats, parseNatsServers } from "../bus/nats-connection.js";
import { NatsInvocations } from "./nats-invocations.js";
import { WorkQueue } from "./work-queue.js";

/**
 * The library's and the CLI's `createRunner` (src/index.ts): the agency's
 * createRunner (src/agency/agency.ts) with `invocationsOnWorkers` given, so an
 * agency.yaml with `bus: nats://…` runs its invocations on the `runner
 * worker`s of its `pool`. Composed here, above worker/, because the layering
 * keeps agency/ from importing worker/ (docs/architecture.md "Layers"): the
 * agency sees only the InvocationExecutor seam. Credentials come from the
 * environment as for `runner worker` (src/bus/nats-connection.ts).
 */
export async function createRunner(options: AgencyRunnerOptions = {}): Promise<AgencyRunner> {
  return createAgencyRunner({ invocationsOnWorkers: openInvocationsOnWorkers(options.environment ?? process.env), ...options });
}

/**
 * Connects to the agency's cluster and opens its pool's queue; the executor's
 * `close` closes both. SandboxError (exit 3) when the cluster does not answer,
 * ConfigError (exit 2) for a bad `bus` URL or credentials setting.
 */
function openInvocationsOnWorkers(environment: NodeJS.ProcessEnv): NonNullable<AgencyRunnerOptions["invocationsOnWorkers"]> {
  return async ({ servers, pool, home }) => {
    const log = createLogger({ component: "agency-workers", pool });
    let connection;
    try {
      connection = await connectNats({
        servers: parseNatsServers(servers, "bus"),
        name: `agent-runner orchestrator ${hostname()}:${process.pid}`,
        environment,
      });
    } catch (error) {
      if (error instanceof ConfigError) throw error;
      throw new SandboxError(`bus: ${errorMessage(error)}; check bus: in agency.yaml and that the servers run (docs/scale-out.md)`, {
        reason: "nats_unreachable",
        cause: error,
      });
    }
    try {
      const queue = await WorkQueue.open(connection, { pool, onWait: (reason) => log.warn(reason) });
      return await NatsInvocations.open(queue, home, { environment, log: (line) => log.info(line), ownsConnection: true });
    } catch (error) {
      await connection.close();
      throw new SandboxError(`pool ${pool}: JetStream is not usable: ${errorMessage(error)}`, { reason: "nats_unavailable", cause: error });
    }
  };
}
