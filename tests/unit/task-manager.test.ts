import { describe, expect, it } from "vitest";
import { TaskManager, taskTools, type TaskResult } from "../../src/agents/task-manager.js";
import type { RunEvent } from "../../src/events/run-events.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";

function gate() {
  let open!: (result: TaskResult) => void;
  const promise = new Promise<TaskResult>((resolve) => (open = resolve));
  return { promise, open };
}

function manager(maxParallel = 2) {
  const events: RunEvent[] = [];
  const tasks = new TaskManager({ emit: (event) => events.push(event) }, maxParallel);
  return { tasks, events, signal: new AbortController().signal };
}

describe("TaskManager", () => {
  it("runs at most maxParallel agent tasks at once; the rest wait as pending", async () => {
    const { tasks, signal } = manager(2);
    const gates = [gate(), gate(), gate()];
    const started = gates.map((entry, index) =>
      tasks.start({ kind: "agent", description: `job ${index}`, background: false, parentSignal: signal }, () => entry.promise),
    );
    await expect.poll(() => tasks.list().map((record) => record.status)).toEqual(["running", "running", "pending"]);
    gates[0]!.open({ status: "completed", output: "done 0" });
    await started[0]!.done;
    await expect.poll(() => tasks.get("t3")!.status).toBe("running");
    gates[1]!.open({ status: "failed", output: "broke" });
    gates[2]!.open({ status: "completed", output: "done 2" });
    const ended = await Promise.all(started.map((entry) => entry.done));
    expect(ended.map((record) => [record.id, record.status, record.output])).toEqual([
      ["t1", "completed", "done 0"],
      ["t2", "failed", "broke"],
      ["t3", "completed", "done 2"],
    ]);
  });

  it("stop() cancels a running task through its signal; stopping a pending one never starts it", async () => {
    const { tasks, signal } = manager(1);
    let sawAbort = false;
    const running = tasks.start(
      { kind: "agent", description: "long", background: true, parentSignal: signal },
      (taskSignal) =>
        new Promise<TaskResult>((_, reject) =>
          taskSignal.addEventListener("abort", () => {
            sawAbort = true;
            reject(new Error("aborted"));
          }),
        ),
    );
    let bodyRan = false;
    const pending = tasks.start({ kind: "agent", description: "queued", background: true, parentSignal: signal }, async () => {
      bodyRan = true;
      return { status: "completed", output: "" };
    });
    await expect.poll(() => running.record.status).toBe("running");
    expect((await tasks.stop(pending.record.id))!.status).toBe("cancelled");
    expect((await tasks.stop(running.record.id))!.status).toBe("cancelled");
    expect(sawAbort).toBe(true);
    expect(bodyRan).toBe(false);
    // The stopped waiter did not keep a slot: a new task gets one.
    const next = tasks.start({ kind: "agent", description: "after", background: false, parentSignal: signal }, async () => ({
      status: "completed",
      output: "ran",
    }));
    expect((await next.done).output).toBe("ran");
    // Background ends become notifications, delivered once.
    const notes = tasks.drainNotifications();
    expect(notes).toHaveLength(2);
    expect(notes.join("\n")).not.toContain("after");
    expect(notes[0]).toMatch(/^\[background task t2 \(agent: queued\) cancelled\]/);
    expect(tasks.drainNotifications()).toEqual([]);
  });

  it("a background task's end wakes waitForBackground; shell tasks need no slot", async () => {
    const { tasks, signal, events } = manager(1);
    const hold = gate();
    tasks.start({ kind: "agent", description: "holds the only slot", background: false, parentSignal: signal }, () => hold.promise);
    const shell = gate();
    tasks.start({ kind: "shell", description: "sleep 1", background: true, parentSignal: signal }, () => shell.promise);
    await expect.poll(() => tasks.get("t2")!.status).toBe("running");
    expect(tasks.hasRunningBackground()).toBe(true);
    const woken = tasks.waitForBackground();
    shell.open({ status: "completed", output: "exit_code: 0" });
    await woken;
    expect(tasks.hasRunningBackground()).toBe(false);
    hold.open({ status: "completed", output: "" });
    await tasks.stopAll();
    expect(events.filter((event) => event.type === "task.finished").map((event) => event.data.task_id)).toEqual(["t2", "t1"]);
  });

  it("task tools list, show, page and stop tasks, and name unknown ids", async () => {
    const { tasks, signal } = manager(2);
    const registry = new ToolRegistry(taskTools(tasks));
    const context = { sandbox: new FakeSandbox(), signal, toolCallId: "c", defaultTimeoutMs: 1000 };
    const finished = tasks.start({ kind: "shell", description: "seq 5", background: true, parentSignal: signal }, async () => ({
      status: "completed",
      output: "1\n2\n3\n4\n5",
    }));
    await finished.done;
    const running = tasks.start(
      { kind: "agent", description: "explore", background: true, agentId: "e1", parentSignal: signal },
      (taskSignal) => new Promise<TaskResult>((resolve) => taskSignal.addEventListener("abort", () => resolve({ status: "completed", output: "" }))),
    );
    await expect.poll(() => running.record.status).toBe("running");
    expect((await registry.execute("task_list", "{}", context)).content).toMatch(
      /t1 {2}shell {2}completed {2}background[\s\S]*t2 {2}agent {2}running {2}background {2}agent e1/,
    );
    expect((await registry.execute("task_output", '{"task_id":"t1","offset":2,"limit":2}', context)).content).toBe("[task t1 completed: lines 2-3 of 5]\n2\n3");
    expect((await registry.execute("task_output", '{"task_id":"t2"}', context)).content).toContain("available when it ends");
    expect((await registry.execute("task_get", '{"task_id":"t9"}', context)).content).toBe("Error: no task t9; task_list shows them");
    expect((await registry.execute("task_stop", '{"task_id":"t2"}', context)).content).toBe("task t2 stopped: cancelled");
    expect((await registry.execute("task_stop", '{"task_id":"t1"}', context)).content).toBe("task t1 had already ended: completed");
  });
});
