"use strict";
// The runner's end of the persistent channel into a task container.
//
// Started once per container (by `node -e`, its source passed in the
// environment: docker/inline-script.ts), it reads newline-delimited
// JSON requests on stdin and writes one JSON response line per request on
// stdout. Keeping one process alive answers a tool call in well under a
// millisecond, where a Docker exec per call costs ~40 ms (bench/).
//
// Plain CommonJS on Node's standard library only: it runs on the image's
// Node (Debian bookworm ships 18) and never depends on anything in the
// workspace or the image beyond node and bash. When stdin closes
// (the runner went away, even by kill -9) it exits, which ends the container.

const childProcess = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const readline = require("node:readline");

// A name of our own, so `ps` shows what it is.
process.title = "agent-runner-sandboxd";

// The daemon starts as root inside the container (holding only CAP_SETUID and
// CAP_SETGID; the container drops every other capability) and at once takes
// the sandbox user as its *effective* ids, keeping root as its real and saved
// ids. Its file operations therefore run as the sandbox user (files belong to
// it, permissions apply), while the agent's processes, which run as the
// sandbox user in all three ids, cannot touch the daemon: signals (`kill -9
// -1`, SIGSTOP) need a matching real or saved uid, and ptrace or
// /proc/<pid>/{mem,environ} need matching ids *and* a dumpable process; the
// credential change itself makes the kernel mark the daemon non-dumpable
// (fs.suid_dumpable, default 0; see prctl(2) PR_SET_DUMPABLE).
const SANDBOX_UID = Number(process.env.RUNNER_SANDBOX_UID);
const SANDBOX_GID = Number(process.env.RUNNER_SANDBOX_GID);
delete process.env.RUNNER_SANDBOX_UID;
delete process.env.RUNNER_SANDBOX_GID;
if (process.getuid() !== 0 || !(SANDBOX_UID > 0) || !(SANDBOX_GID >= 0)) {
  process.stderr.write(`agent-runner-sandboxd must start as root with RUNNER_SANDBOX_UID/GID set (uid ${process.getuid()}, sandbox ${SANDBOX_UID}:${SANDBOX_GID})\n`);
  process.exit(70);
}
process.setgroups([]);
process.setegid(SANDBOX_GID);
process.seteuid(SANDBOX_UID);

// Starts a command as the sandbox user in all three ids, in directory `cwd`.
// Root is taken back as the effective uid only for the duration of the
// (synchronous) spawn: libuv's child then drops supplementary groups, sets the
// gid and the uid (which clears every capability) before it execs, and spawn
// returns only after that exec. The child inherits the daemon's working
// directory, entered as the sandbox user first: libuv would chdir while still
// root, and root without CAP_DAC_OVERRIDE cannot enter a 0700 workspace.
function spawnAsSandboxUser(file, args, cwd, options) {
  process.chdir(cwd);
  process.seteuid(0);
  try {
    return childProcess.spawn(file, args, { ...options, uid: SANDBOX_UID, gid: SANDBOX_GID });
  } finally {
    process.setegid(SANDBOX_GID);
    process.seteuid(SANDBOX_UID);
  }
}

const WORKSPACE = process.env.RUNNER_WORKSPACE || "/workspace";
const WORKSPACE_REAL = fs.realpathSync(WORKSPACE);
const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024;
const running = new Map(); // exec id -> { child, marker }

class RequestError extends Error {
  constructor(code, message, extra) {
    super(message);
    this.code = code;
    this.extra = extra || {};
  }
}

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

function isInside(real) {
  return real === WORKSPACE_REAL || real.startsWith(WORKSPACE_REAL + "/");
}

// Resolves `requested` the way the kernel would, inside this container: the
// deepest existing ancestor goes through realpath (so `..` and symlinks are
// followed), a dangling symlink is followed by hand (its target may be created
// by a write), and the not-yet-existing rest is appended. Refuses anything
// that ends up outside the workspace.
const MAX_SYMLINK_HOPS = 40;

function resolveInside(requested) {
  if (typeof requested !== "string" || requested.length === 0) {
    throw new RequestError("BAD_PATH", "path must be a non-empty string");
  }
  if (requested.includes("\0")) throw new RequestError("BAD_PATH", "path contains a NUL byte");
  let pending = path.resolve(WORKSPACE_REAL, requested);
  for (let hop = 0; hop < MAX_SYMLINK_HOPS; hop += 1) {
    const missing = []; // deepest first
    let existing = pending;
    let followed = false;
    while (!followed) {
      try {
        const real = fs.realpathSync(existing);
        const resolved = path.join(real, ...[...missing].reverse());
        if (!isInside(resolved)) {
          throw new RequestError("OUTSIDE_WORKSPACE", "outside workspace", { resolved });
        }
        return resolved;
      } catch (error) {
        if (error instanceof RequestError) throw error;
        if (error.code !== "ENOENT" && error.code !== "ENOTDIR") throw error;
        let target = null;
        try {
          target = fs.readlinkSync(existing);
        } catch {
          // not a symlink: a name that does not exist yet
        }
        if (target !== null) {
          pending = path.resolve(path.dirname(existing), target, ...[...missing].reverse());
          followed = true;
        } else {
          if (existing === "/") throw error;
          missing.push(path.basename(existing));
          existing = path.dirname(existing);
        }
      }
    }
  }
  throw new RequestError("BAD_PATH", `more than ${MAX_SYMLINK_HOPS} symbolic links in "${requested}"`);
}

function kindOf(stats) {
  if (stats.isFile()) return "file";
  if (stats.isDirectory()) return "directory";
  if (stats.isSymbolicLink()) return "symlink";
  return "other";
}

function readOp(request) {
  const resolved = resolveInside(request.path);
  let stats;
  try {
    stats = fs.statSync(resolved);
  } catch (error) {
    if (error.code === "ENOENT" || error.code === "ENOTDIR") return null;
    throw error;
  }
  if (!stats.isFile()) throw new RequestError("NOT_A_FILE", "not a regular file", { actual: kindOf(stats) });
  const maxBytes = Math.min(request.maxBytes ?? stats.size, stats.size);
  const buffer = Buffer.alloc(maxBytes);
  const fd = fs.openSync(resolved, "r");
  try {
    let offset = 0;
    while (offset < maxBytes) {
      const read = fs.readSync(fd, buffer, offset, maxBytes - offset, offset);
      if (read === 0) break;
      offset += read;
    }
    return { path: resolved, size: stats.size, content: buffer.subarray(0, offset).toString("base64") };
  } finally {
    fs.closeSync(fd);
  }
}

function writeOp(request) {
  const resolved = resolveInside(request.path);
  let mode = 0o644;
  try {
    const stats = fs.lstatSync(resolved);
    if (stats.isDirectory()) throw new RequestError("NOT_A_FILE", "not a regular file", { actual: "directory" });
    if (stats.isFile()) mode = stats.mode & 0o7777;
  } catch (error) {
    if (error instanceof RequestError) throw error;
    if (error.code !== "ENOENT") throw error;
  }
  const directory = path.dirname(resolved);
  fs.mkdirSync(directory, { recursive: true });
  // A fresh inode renamed over the target: a hard link or symlink that sat at
  // the target keeps pointing at the old content, never at the new bytes.
  const temporary = path.join(directory, `.runner-write-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`);
  const content = Buffer.from(request.content, "base64");
  try {
    fs.writeFileSync(temporary, content, { mode, flag: "wx" });
    fs.chmodSync(temporary, mode);
    fs.renameSync(temporary, resolved);
  } catch (error) {
    fs.rmSync(temporary, { force: true });
    throw error;
  }
  return { path: resolved, bytesWritten: content.length };
}

function statOp(request) {
  const resolved = resolveInside(request.path);
  try {
    const stats = fs.statSync(resolved);
    return { path: resolved, type: kindOf(stats), size: stats.size, mtimeMs: stats.mtimeMs };
  } catch (error) {
    if (error.code === "ENOENT" || error.code === "ENOTDIR") return null;
    throw error;
  }
}

function listOp(request) {
  const resolved = resolveInside(request.path);
  let entries;
  try {
    entries = fs.readdirSync(resolved, { withFileTypes: true });
  } catch (error) {
    if (error.code === "ENOENT") return null;
    if (error.code === "ENOTDIR") throw new RequestError("NOT_A_DIRECTORY", "not a directory");
    throw error;
  }
  return entries
    .map((entry) => ({ name: entry.name, type: kindOf(entry) }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

// Keeps the first and the last `limit / 2` bytes of a stream: memory stays
// bounded however much a command prints.
class HeadTailCapture {
  constructor(limit) {
    this.half = Math.max(1, Math.floor(limit / 2));
    this.head = [];
    this.headBytes = 0;
    this.tail = [];
    this.tailBytes = 0;
    this.total = 0;
  }
  push(chunk) {
    this.total += chunk.length;
    if (this.headBytes < this.half) {
      const take = Math.min(this.half - this.headBytes, chunk.length);
      this.head.push(chunk.subarray(0, take));
      this.headBytes += take;
      chunk = chunk.subarray(take);
      if (chunk.length === 0) return;
    }
    this.tail.push(chunk);
    this.tailBytes += chunk.length;
    while (this.tail.length > 1 && this.tailBytes - this.tail[0].length >= this.half) {
      this.tailBytes -= this.tail.shift().length;
    }
  }
  get truncated() {
    return this.total > this.headBytes + Math.min(this.tailBytes, this.half);
  }
  text() {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.half) tail = tail.subarray(tail.length - this.half);
    const omitted = this.total - head.length - tail.length;
    if (omitted <= 0) return Buffer.concat([head, tail]).toString("utf8");
    return `${head.toString("utf8")}\n[... ${omitted} bytes omitted ...]\n${tail.toString("utf8")}`;
  }
}

// Every process a command starts inherits RUNNER_EXEC_ID=<marker> in its
// environment, so the whole tree can be found even after a child calls
// setsid() or is re-parented to init. A process whose environment shows no
// marker at all has wiped it, and one whose environment cannot be read has
// made itself non-dumpable (prctl PR_SET_DUMPABLE 0) or changed its
// credentials: either way it is trying not to be found, so it counts as part
// of any tree being killed. Only a process that is gone is skipped.
const MARKER_PREFIX = Buffer.from("RUNNER_EXEC_ID=");

function processesMatching(marker) {
  const needle = marker === null ? null : Buffer.from(`RUNNER_EXEC_ID=${marker}\0`);
  const found = [];
  for (const name of fs.readdirSync("/proc")) {
    const pid = Number(name);
    // PID 1 is the container's init; our own process answers the runner.
    if (!/^\d+$/.test(name) || pid === process.pid || pid === 1) continue;
    // A zombie runs nothing and cannot be killed; its reaper (init, or Docker for an exec) takes it.
    if (!isRunning(name)) continue;
    if (needle === null) {
      // Everything in the container's pid namespace, whatever its environment says.
      found.push(pid);
      continue;
    }
    let environ;
    try {
      environ = fs.readFileSync(`/proc/${name}/environ`);
    } catch (error) {
      if (error.code === "ENOENT" || error.code === "ESRCH") continue; // exited meanwhile
      found.push(pid); // unreadable: hiding
      continue;
    }
    if (environ.includes(needle) || !environ.includes(MARKER_PREFIX)) found.push(pid);
  }
  return found;
}

// False for a process that is gone, a zombie or dead (the state in /proc/<pid>/stat, readable for any process).
function isRunning(pid) {
  let stat;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state !== "Z" && state !== "X" && state !== "x";
}

function killAll(pids) {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
}

// How long a kill keeps at it before it reports failure, ms. SIGKILL is
// delivered asynchronously: a process stays visible (not yet a zombie) until
// the kernel has run it once more, which on a loaded machine takes a while.
const KILL_DEADLINE_MS = 5000;
const pauseCell = new Int32Array(new SharedArrayBuffer(4));

// marker null: every process but init and this daemon.
function killMatching(marker, groupLeader) {
  const deadline = Date.now() + KILL_DEADLINE_MS;
  // Repeat: a process may fork while we scan, and a killed one takes a moment to go.
  for (let round = 0; ; round += 1) {
    if (groupLeader) {
      try {
        process.kill(-groupLeader, "SIGKILL");
      } catch {
        // group already gone
      }
    }
    const left = processesMatching(marker);
    if (left.length === 0) return true;
    if (Date.now() > deadline) return false;
    killAll(left);
    // The first rounds back to back (a forking tree is caught fastest), then short waits.
    if (round >= 5) Atomics.wait(pauseCell, 0, 0, Math.min(20, round));
  }
}

function killTree(entry) {
  killMatching(entry.marker, entry.child.pid);
}

let execCounter = 0;

function execOp(request, respond) {
  const cwd = resolveInside(request.cwd || ".");
  if (!fs.statSync(cwd).isDirectory()) throw new RequestError("NOT_A_DIRECTORY", "cwd is not a directory");
  const limit = request.maxOutputBytes || DEFAULT_MAX_OUTPUT_BYTES;
  const marker = `${process.pid}-${++execCounter}`;
  const started = Date.now();
  const child = spawnAsSandboxUser("/bin/bash", ["-c", request.command], cwd, {
    env: { ...process.env, ...(request.env || {}), RUNNER_EXEC_ID: marker },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const entry = { child, marker, timedOut: false, killed: false };
  running.set(request.execId ?? request.id, entry);
  const stdout = new HeadTailCapture(limit);
  const stderr = new HeadTailCapture(limit);
  child.stdout.on("data", (chunk) => stdout.push(chunk));
  child.stderr.on("data", (chunk) => stderr.push(chunk));
  let timer = null;
  if (request.timeoutMs) {
    timer = setTimeout(() => {
      entry.timedOut = true;
      killTree(entry);
    }, request.timeoutMs);
  }
  let exit = null;
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    if (timer) clearTimeout(timer);
    running.delete(request.execId ?? request.id);
    respond({
      exitCode: exit.code,
      signal: exit.signal,
      stdout: stdout.text(),
      stderr: stderr.text(),
      stdoutBytes: stdout.total,
      stderrBytes: stderr.total,
      truncated: stdout.truncated || stderr.truncated,
      timedOut: entry.timedOut,
      durationMs: Date.now() - started,
    });
  };
  child.on("error", (error) => {
    exit = { code: 127, signal: null };
    stderr.push(Buffer.from(String(error.message)));
    finish();
  });
  child.on("exit", (code, signal) => {
    exit = { code, signal };
    // A background process that kept our pipes open must not hold the answer:
    // give the pipes a moment to drain, then answer with what we have.
    const drain = setTimeout(() => {
      child.stdout.destroy();
      child.stderr.destroy();
      finish();
    }, entry.timedOut || entry.killed ? 0 : 200);
    child.on("close", () => {
      clearTimeout(drain);
      finish();
    });
  });
}

// Before the host touches the worktree (commit), nothing the agent started may
// still run: a background process could swap a directory for a symlink while
// host git reads it.
function stopAllOp() {
  for (const entry of running.values()) entry.killed = true;
  return { stopped: killMatching(null, null) };
}

function killOp(request) {
  const entry = running.get(request.execId);
  if (!entry) return { killed: false };
  entry.killed = true;
  killTree(entry);
  return { killed: true };
}

// A process started with `docker exec` for Sandbox.spawn (an MCP server)
// carries a marker of its own (spawn-<id>), so another command's timeout
// spares it; this kills it and everything it started.
function killSpawnedOp(request) {
  if (typeof request.marker !== "string" || !/^spawn-[A-Za-z0-9-]+$/.test(request.marker)) {
    throw new RequestError("BAD_REQUEST", "marker must look like spawn-<id>");
  }
  return { stopped: killMatching(request.marker, null) };
}

// What the files under `roots` occupy: allocated blocks (st_blocks, so a
// sparse file costs only what it really holds), each inode once, never
// following a link or crossing into another mount (the git metadata, the
// workspace's .git file). Asynchronous, a directory's entries a batch at a
// time, so the channel keeps answering during a walk of a large tree. A
// directory the sandbox user cannot read into is not counted.
const DISK_WALK_BATCH = 64;

async function diskUsageOp(request) {
  if (!Array.isArray(request.roots) || !request.roots.every((root) => typeof root === "string" && path.isAbsolute(root))) {
    throw new RequestError("BAD_REQUEST", "roots must be absolute paths");
  }
  const counted = new Set();
  let bytes = 0;
  for (const root of request.roots) {
    let rootStats;
    try {
      rootStats = await fs.promises.lstat(root);
    } catch {
      continue;
    }
    bytes += rootStats.blocks * 512;
    const pending = rootStats.isDirectory() ? [root] : [];
    while (pending.length > 0) {
      const directory = pending.pop();
      let names;
      try {
        names = await fs.promises.readdir(directory);
      } catch {
        continue; // unreadable, or removed meanwhile
      }
      for (let start = 0; start < names.length; start += DISK_WALK_BATCH) {
        const batch = names.slice(start, start + DISK_WALK_BATCH).map((name) => path.join(directory, name));
        const stats = await Promise.all(batch.map((entry) => fs.promises.lstat(entry).catch(() => null)));
        stats.forEach((entryStats, index) => {
          if (entryStats === null || entryStats.dev !== rootStats.dev) return;
          if (entryStats.nlink > 1 && !entryStats.isDirectory()) {
            const key = `${entryStats.dev}:${entryStats.ino}`;
            if (counted.has(key)) return;
            counted.add(key);
          }
          bytes += entryStats.blocks * 512;
          if (entryStats.isDirectory()) pending.push(batch[index]);
        });
      }
    }
  }
  return { bytes };
}

function fail(request, error) {
  send({
    id: request.id,
    ok: false,
    error: { code: error.code || "ERROR", message: error.message, ...(error.extra || {}) },
  });
}

function handle(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    send({ id: null, ok: false, error: { code: "BAD_REQUEST", message: "request is not JSON" } });
    return;
  }
  const respond = (result) => send({ id: request.id, ok: true, result });
  try {
    switch (request.op) {
      case "ping":
        return respond({ pid: process.pid, uid: SANDBOX_UID, gid: SANDBOX_GID, node: process.version });
      case "read":
        return respond(readOp(request));
      case "write":
        return respond(writeOp(request));
      case "list":
        return respond(listOp(request));
      case "stat":
        return respond(statOp(request));
      case "exec":
        return execOp(request, respond);
      case "kill":
        return respond(killOp(request));
      case "stop_all":
        return respond(stopAllOp());
      case "kill_spawned":
        return respond(killSpawnedOp(request));
      case "disk_usage":
        return void diskUsageOp(request).then(respond, (error) => fail(request, error));
      default:
        throw new RequestError("BAD_REQUEST", `unknown op ${request.op}`);
    }
  } catch (error) {
    fail(request, error);
  }
}

const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on("line", handle);
input.on("close", () => {
  killMatching(null, null);
  process.exit(0);
});
send({ id: 0, ok: true, result: { ready: true, pid: process.pid, uid: SANDBOX_UID } });
