/**
 * Times the Engine API calls DockerSandboxProvider.create makes, without
 * touching src/: wraps dockerode's createContainer (on the instance handed to
 * the provider) and Image#inspect, Container#attach/start (on the shared
 * prototypes) with timers that record into the active trace.
 * Calls outside a trace (or from other code paths) are not recorded.
 */
import { performance } from "node:perf_hooks";
import type Docker from "dockerode";

export interface Phase {
  name: string;
  start: number;
  end: number;
}

let active: Phase[] | null = null;

/** Runs `fn` with a fresh trace; returns its result and the phases recorded meanwhile. */
export async function traced<T>(fn: () => Promise<T>): Promise<{ value: T; phases: Phase[]; start: number; end: number }> {
  const phases: Phase[] = [];
  const previous = active;
  active = phases;
  const start = performance.now();
  try {
    const value = await fn();
    return { value, phases, start, end: performance.now() };
  } finally {
    active = previous;
  }
}

function wrap(target: Record<string, unknown>, method: string, phase: string): void {
  const original = target[method] as (...args: unknown[]) => Promise<unknown>;
  if ((original as { __benchWrapped?: boolean }).__benchWrapped) return;
  const wrapped = async function (this: unknown, ...args: unknown[]) {
    const trace = active;
    const start = performance.now();
    try {
      return await original.apply(this, args);
    } finally {
      trace?.push({ name: phase, start, end: performance.now() });
    }
  };
  (wrapped as { __benchWrapped?: boolean }).__benchWrapped = true;
  target[method] = wrapped;
}

export function instrument(docker: Docker): void {
  wrap(docker as unknown as Record<string, unknown>, "createContainer", "create");
  const imagePrototype = Object.getPrototypeOf(docker.getImage("x")) as Record<string, unknown>;
  wrap(imagePrototype, "inspect", "inspectImage");
  const containerPrototype = Object.getPrototypeOf(docker.getContainer("x")) as Record<string, unknown>;
  wrap(containerPrototype, "attach", "attach");
  wrap(containerPrototype, "start", "start");
}

/** Duration of the first phase called `name`, or NaN. */
export function phaseMs(phases: Phase[], name: string): number {
  const phase = phases.find((candidate) => candidate.name === name);
  return phase ? phase.end - phase.start : Number.NaN;
}

export function phaseEnd(phases: Phase[], name: string): number {
  const phase = phases.find((candidate) => candidate.name === name);
  return phase ? phase.end : Number.NaN;
}
