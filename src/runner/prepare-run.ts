import type { Task } from "../config/load-task.js";
import { createLogger, type LogSettings } from "../logging/logger.js";
import { checkTaskModel } from "./check-script.js";
import type { Tool } from "../tools/define-tool.js";
import { sweepDeadRunDisks, sweepDeadRuns } from "../run/run-lock.js";
import { DockerSandboxProvider } from "../sandbox/docker/docker-sandbox-provider.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import { sweepLeftovers } from "../sandbox/docker/sweep-leftovers.js";
import { ensureTaskImage } from "../sandbox/task-image.js";

/**
 * Checks what a task needs before anything of a run is created (no branch,
 * worktree or container): the model settings (a missing key or script is
 * ConfigError, exit 2), then Docker with the task's image, pulled when absent
 * or built from `sandbox.build` (SandboxError, exit 3; src/sandbox/task-image.ts).
 * Returns the task with `sandbox.image` set to the image the run uses.
 */
export async function prepareRun(
  task: Task,
  provider: DockerSandboxProvider,
  environment: NodeJS.ProcessEnv = process.env,
  hostTools: readonly Tool[] = [],
): Promise<Task> {
  checkTaskModel(task, environment, hostTools);
  return prepareImage(task, provider);
}

/**
 * The image half of {@link prepareRun} (also for re-verifying an ended run, which needs no model): the
 * task's image pulled or built, and Docker checked ready to run it. Returns the task with that image.
 */
export async function prepareImage(task: Task, provider: DockerSandboxProvider): Promise<Task> {
  const { image } = await ensureTaskImage(provider.docker, task.sandbox);
  await provider.checkReady(image, { egress: task.sandbox.network.allow.length > 0 });
  return image === task.sandbox.image ? task : { ...task, sandbox: { ...task.sandbox, image } };
}

/**
 * Leftovers of runs whose runner died (kill -9, crash): for Docker, containers
 * and networks first; then, whatever the backend, the runs' worktrees
 * (committed on their branches, once the provider's ensureWorkspaceIdle lets
 * host git at them) and disks. Failures are logged, never thrown: one stuck
 * leftover must not stop a start.
 */
export async function sweepDeadRunLeftovers(provider: SandboxProvider, home: string, log: LogSettings = {}): Promise<void> {
  const logger = createLogger({ component: "sweep" }, log);
  if (provider instanceof DockerSandboxProvider) {
    await sweepLeftovers(provider.docker).then(
      (swept) => (swept.containers.length || swept.networks.length) && logger.info({ swept }, "removed leftovers of dead runs"),
      (error: unknown) => logger.warn({ err: error }, "could not sweep leftover containers"),
    );
  }
  await sweepDeadRuns(home, provider).then(
    (runs) => runs.length && logger.info({ runs }, "committed and removed the worktrees of runs whose runner died (continue them with runner resume)"),
    (error: unknown) => logger.warn({ err: error }, "could not sweep dead runs"),
  );
  // Then machine-wide: dead runs' loop-mounted disks, whatever their RUNNER_HOME (this home's are closed above).
  await sweepDeadRunDisks(provider).then(
    ({ unmounted, failed }) => {
      if (unmounted.length) logger.info({ unmounted }, "unmounted the disks of runs whose runner died");
      if (failed.length) logger.warn({ failed }, "could not unmount the disks of some runs whose runner died");
    },
    (error: unknown) => logger.warn({ err: error }, "could not sweep the disks of dead runs"),
  );
}
