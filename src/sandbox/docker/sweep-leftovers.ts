import type Docker from "dockerode";
import { LABEL_OWNER, LABEL_RUN_ID } from "./labels.js";
import { isOwnerAlive } from "../../process/process-owner.js";

export interface SweepResult {
  /** Ids (short) of containers removed. */
  containers: string[];
  /** Names of networks removed. */
  networks: string[];
}

/**
 * Removes containers and networks labelled by a run whose runner process is
 * gone (crashed, `kill -9`). Resources of live runners, and of other hosts
 * sharing the daemon, are left alone. Failures to remove one resource are
 * skipped so one stuck container cannot block every later start.
 */
export async function sweepLeftovers(docker: Docker): Promise<SweepResult> {
  const result: SweepResult = { containers: [], networks: [] };
  const containers = await docker.listContainers({ all: true, filters: { label: [LABEL_RUN_ID] } });
  await Promise.all(
    containers
      .filter((info) => !isOwnerAlive(info.Labels[LABEL_OWNER]))
      .map(async (info) => {
        try {
          await docker.getContainer(info.Id).remove({ force: true, v: true });
          result.containers.push(info.Id.slice(0, 12));
        } catch {
          // already gone, or being removed by Docker (AutoRemove)
        }
      }),
  );
  const networks = await docker.listNetworks({ filters: { label: [LABEL_RUN_ID] } });
  for (const network of networks) {
    if (isOwnerAlive(network.Labels?.[LABEL_OWNER])) continue;
    try {
      await docker.getNetwork(network.Id).remove();
      result.networks.push(network.Name);
    } catch {
      // still in use by a container being removed; the next start retries
    }
  }
  return result;
}
