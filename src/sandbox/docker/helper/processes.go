package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Every process a command starts inherits RUNNER_EXEC_ID=<marker> in its
// environment, so the whole tree can be found even after a child calls
// setsid() or is re-parented to init. A process whose environment shows no
// marker at all has wiped it, and one whose environment cannot be read has
// made itself non-dumpable (prctl PR_SET_DUMPABLE 0) or changed its
// credentials: either way it is trying not to be found, so it counts as part
// of any tree being killed. Only a process that is gone is skipped.
const markerVariable = "RUNNER_EXEC_ID"

var (
	markerPrefix = []byte(markerVariable + "=")
	spawnMarker  = regexp.MustCompile(`^spawn-[A-Za-z0-9-]+$`)
)

// processLock is held by every kill for its whole length and by every
// process start: a command started while another command's tree is being
// killed would otherwise count as hiding there (a process between fork and
// setuid, still with root's real uid, has an environment the helper cannot
// read) and be killed with it. The Node daemon got this from its single
// thread.
var processLock sync.Mutex

// killDeadline is how long a kill keeps at it before it reports failure.
// SIGKILL is delivered asynchronously: a process stays visible (not yet a
// zombie) until the kernel has run it once more, which on a loaded machine
// takes a while.
const killDeadline = 5 * time.Second

// processesMatching lists the pids carrying `marker` (or hiding, see above);
// marker nil: every process in the container's pid namespace but init and
// this helper, whatever its environment says.
func processesMatching(marker *string) []int {
	var needle []byte
	if marker != nil {
		needle = []byte(markerVariable + "=" + *marker + "\x00")
	}
	directory, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := directory.Readdirnames(-1)
	directory.Close()
	self := os.Getpid()
	var found []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		// PID 1 is the container's init; our own process answers the runner.
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		// A zombie runs nothing and cannot be killed; its reaper (init, or Docker for an exec) takes it.
		if !isRunning(name) {
			continue
		}
		if needle == nil {
			found = append(found, pid)
			continue
		}
		environ, err := os.ReadFile("/proc/" + name + "/environ")
		if err != nil {
			if errno, ok := errnoOf(err); ok && (errno == syscall.ENOENT || errno == syscall.ESRCH) {
				continue // exited meanwhile
			}
			found = append(found, pid) // unreadable: hiding
			continue
		}
		if bytes.Contains(environ, needle) || !bytes.Contains(environ, markerPrefix) {
			found = append(found, pid)
		}
	}
	return found
}

// isRunning is false for a process that is gone, a zombie or dead (the state
// in /proc/<pid>/stat, readable for any process).
func isRunning(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 || end+2 >= len(stat) {
		return false
	}
	state := stat[end+2]
	return state != 'Z' && state != 'X' && state != 'x'
}

// killMatching SIGKILLs the processes of processesMatching(marker) (and the
// process group of groupLeader, when > 0) until none is left, for at most
// killDeadline; false when some were still there at the deadline.
func killMatching(marker *string, groupLeader int) bool {
	processLock.Lock()
	defer processLock.Unlock()
	deadline := time.Now().Add(killDeadline)
	// Repeat: a process may fork while we scan, and a killed one takes a moment to go.
	for round := 0; ; round++ {
		if groupLeader > 0 {
			syscall.Kill(-groupLeader, syscall.SIGKILL)
		}
		left := processesMatching(marker)
		if len(left) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		// The first rounds back to back (a forking tree is caught fastest), then short waits.
		if round >= 5 {
			wait := round
			if wait > 20 {
				wait = 20
			}
			time.Sleep(time.Duration(wait) * time.Millisecond)
		}
	}
}
