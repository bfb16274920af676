import type Docker from "dockerode";
import { Semaphore } from "async-mutex";
import { errorMessage, SandboxError } from "../errors.js";
import { ensureTaskImage, type TaskImage } from "../sandbox/task-image.js";
import type { Task } from "../config/load-task.js";

/** A task's start refused because {@link prepareImages} found its image cannot be had (reason `image_unavailable`, an infrastructure error). */
export class ImageUnavailableError extends SandboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { ...options, reason: "image_unavailable" });
  }
}

/** Images made ready at once by {@link prepareImages}: two, so a slow build does not hold every other image. */
const PREPARE_CONCURRENCY = 2;

/** One image the batch's tasks need, and whether it can be had. */
export interface PreparedImage {
  /** What the tasks ask for: `build <Dockerfile> (context <dir>)` or the image reference. */
  need: string;
  /** Ids of the tasks that need it. */
  tasks: string[];
  /** What was done (`present`, `pulled`, `built`, `reused`) and the image the runs use; null when it cannot be had. */
  ready: TaskImage | null;
  /** Why it cannot be had (the pull or build error, naming the field and the fix); null when ready. */
  error: string | null;
}

/**
 * Makes every image of `tasks` ready before any run starts (`runner batch
 * prepare`, and the first step of `runner batch run`): tasks that ask for the
 * same image, or build from identical inputs, share one pull or build. Never
 * throws for an image that cannot be had: it is listed with its error (the
 * batch marks its tasks `error`, reason `image_unavailable`, without a model
 * call). Docker unreachable is such an error for every image.
 */
export async function prepareImages(docker: Docker, tasks: readonly { id: string; task: Task }[]): Promise<PreparedImage[]> {
  const groups = new Map<string, { sandbox: Task["sandbox"]; tasks: string[] }>();
  for (const { id, task } of tasks) {
    const need = imageNeed(task);
    const group = groups.get(need) ?? { sandbox: task.sandbox, tasks: [] };
    group.tasks.push(id);
    groups.set(need, group);
  }
  const semaphore = new Semaphore(PREPARE_CONCURRENCY);
  return Promise.all(
    [...groups].map(([need, group]) =>
      semaphore.runExclusive(async (): Promise<PreparedImage> => {
        try {
          return { need, tasks: group.tasks, ready: await ensureTaskImage(docker, group.sandbox), error: null };
        } catch (error) {
          return { need, tasks: group.tasks, ready: null, error: errorMessage(error) };
        }
      }),
    ),
  );
}

/**
 * What a task asks for, as {@link PreparedImage.need} names it. Builds are
 * told apart by what they are built from; ensureTaskImage also shares one
 * build between identical inputs under other paths.
 */
export function imageNeed(task: Task): string {
  const { build } = task.sandbox;
  return build ? `build ${build.dockerfile} (context ${build.context}${argsText(build.args)})` : task.sandbox.image;
}

function argsText(args: Record<string, string>): string {
  const entries = Object.entries(args).sort(([a], [b]) => a.localeCompare(b));
  return entries.length ? `, args ${entries.map(([name, value]) => `${name}=${value}`).join(" ")}` : "";
}
