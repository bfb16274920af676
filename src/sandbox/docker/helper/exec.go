package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

const defaultMaxOutputBytes = 64 * 1024

// shell is the command interpreter run_shell's commands go to: bash when the
// image has it, else the POSIX /bin/sh (busybox, dash); "" when it has neither.
// Looked up once: the image's file system is read-only.
var shell string

func findShell() {
	for _, candidate := range []string{"/bin/bash", "/bin/sh"} {
		if isExecutableFile(candidate) {
			shell = candidate
			return
		}
	}
}

// isExecutableFile: a regular file with an execute bit, as the sandbox user sees it.
func isExecutableFile(name string) bool {
	info, err := os.Stat(name)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// headTailCapture keeps the first and the last limit/2 bytes of a stream:
// memory stays bounded however much a command prints.
type headTailCapture struct {
	half  int
	head  []byte
	tail  []byte
	total int64
}

func newCapture(limit int) *headTailCapture {
	half := limit / 2
	if half < 1 {
		half = 1
	}
	return &headTailCapture{half: half}
}

func (capture *headTailCapture) push(chunk []byte) {
	capture.total += int64(len(chunk))
	if len(capture.head) < capture.half {
		take := capture.half - len(capture.head)
		if take > len(chunk) {
			take = len(chunk)
		}
		capture.head = append(capture.head, chunk[:take]...)
		chunk = chunk[take:]
	}
	if len(chunk) == 0 {
		return
	}
	capture.tail = append(capture.tail, chunk...)
	// Amortised: trim only once the tail holds twice what it keeps.
	if len(capture.tail) > 2*capture.half {
		capture.tail = append(capture.tail[:0:0], capture.tail[len(capture.tail)-capture.half:]...)
	}
}

func (capture *headTailCapture) keptTail() []byte {
	if len(capture.tail) > capture.half {
		return capture.tail[len(capture.tail)-capture.half:]
	}
	return capture.tail
}

func (capture *headTailCapture) truncated() bool {
	return capture.total > int64(len(capture.head)+len(capture.keptTail()))
}

func (capture *headTailCapture) text() string {
	tail := capture.keptTail()
	omitted := capture.total - int64(len(capture.head)) - int64(len(tail))
	if omitted <= 0 {
		return string(capture.head) + string(tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes omitted ...]\n%s", capture.head, omitted, tail)
}

type runningCommand struct {
	mutex    sync.Mutex
	pid      int
	marker   string
	timedOut bool
	killed   bool
}

func (command *runningCommand) mark(timedOut bool) {
	command.mutex.Lock()
	if timedOut {
		command.timedOut = true
	} else {
		command.killed = true
	}
	command.mutex.Unlock()
}

func (command *runningCommand) state() (timedOut, killed bool) {
	command.mutex.Lock()
	defer command.mutex.Unlock()
	return command.timedOut, command.killed
}

var (
	runningMutex sync.Mutex
	running      = map[string]*runningCommand{} // exec id -> command
	execCounter  int
)

func runningKey(req *request) string {
	if len(req.ExecID) > 0 && string(req.ExecID) != "null" {
		return string(req.ExecID)
	}
	return string(req.ID)
}

// startAsSandboxUser starts argv as the sandbox user in all three ids (which
// clears every capability), in its own session, in directory `dir`.
//
// The helper's effective uid is the sandbox user, so its threads hold no
// effective capability; the child needs CAP_SETUID and CAP_SETGID for
// setgroups/setgid/setuid, which Go's fork runs in the child before exec (and
// before the chdir, so `dir` is entered as the sandbox user: root without
// CAP_DAC_OVERRIDE could not enter a 0700 workspace anyway). Both are still
// in the permitted set (root is the real and saved uid), so one OS thread,
// locked to this goroutine, raises them into its own effective set with
// capset(2) (per thread), forks, and lowers them again before it is
// unlocked. If lowering fails, the goroutine exits still locked, which makes
// the Go runtime end that thread: no other goroutine ever runs on a thread
// with an effective capability (and Go never clones a new runtime thread
// from a locked one).
func startAsSandboxUser(argv []string, dir string, env []string, files []*os.File) (*os.Process, error) {
	type started struct {
		process *os.Process
		err     error
	}
	result := make(chan started, 1)
	go func() {
		runtime.LockOSThread()
		if err := setCredentialCapabilities(true); err != nil {
			setCredentialCapabilities(false)
			result <- started{nil, err}
			return // still locked: the thread ends
		}
		processLock.Lock()
		process, err := os.StartProcess(argv[0], argv, &os.ProcAttr{
			Dir:   dir,
			Env:   env,
			Files: files,
			Sys: &syscall.SysProcAttr{
				Setsid:     true,
				Credential: &syscall.Credential{Uid: uint32(sandboxUID), Gid: uint32(sandboxGID), Groups: []uint32{}},
			},
		})
		processLock.Unlock()
		result <- started{process, err}
		if setCredentialCapabilities(false) == nil {
			runtime.UnlockOSThread()
		}
	}()
	outcome := <-result
	return outcome.process, outcome.err
}

// warmThreads makes the runtime start `count` OS threads now, which it then
// keeps parked for later use. The container's pids limit counts threads: once
// the agent's processes have used it up (a fork bomb), a helper that needed a
// new thread could not get one, and the Go runtime aborts when thread creation
// fails.
func warmThreads(count int) {
	var ready, release sync.WaitGroup
	ready.Add(count)
	release.Add(1)
	for index := 0; index < count; index++ {
		go func() {
			runtime.LockOSThread()
			ready.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	ready.Wait()
	release.Done()
}

// capget/capset(2) structures, _LINUX_CAPABILITY_VERSION_3.
type capabilityHeader struct {
	version uint32
	pid     int32
}

type capabilityData struct {
	effective   uint32
	permitted   uint32
	inheritable uint32
}

const (
	capabilityVersion3 = 0x20080522
	capSetgid          = 6
	capSetuid          = 7
)

// setCredentialCapabilities puts CAP_SETUID and CAP_SETGID into the calling
// thread's effective set (raise) or takes them out (pid 0: this thread only).
func setCredentialCapabilities(raise bool) error {
	header := capabilityHeader{version: capabilityVersion3}
	var data [2]capabilityData
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return os.NewSyscallError("capget", errno)
	}
	if raise {
		data[0].effective |= 1<<capSetuid | 1<<capSetgid
	} else {
		data[0].effective = 0
		data[1].effective = 0
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return os.NewSyscallError("capset", errno)
	}
	return nil
}

// commandEnvironment: the helper's own environment, then `extra`, then the marker.
func commandEnvironment(extra map[string]string, marker string) []string {
	values := map[string]string{}
	var order []string
	set := func(name, value string) {
		if _, seen := values[name]; !seen {
			order = append(order, name)
		}
		values[name] = value
	}
	for _, entry := range os.Environ() {
		for index := 0; index < len(entry); index++ {
			if entry[index] == '=' {
				set(entry[:index], entry[index+1:])
				break
			}
		}
	}
	for name, value := range extra {
		set(name, value)
	}
	set(markerVariable, marker)
	environment := make([]string, 0, len(order))
	for _, name := range order {
		environment = append(environment, name+"="+values[name])
	}
	return environment
}

func execOp(req *request, respond func(interface{})) error {
	cwdRequested := "."
	if req.Cwd != nil && *req.Cwd != "" {
		cwdRequested = *req.Cwd
	}
	cwd, err := resolveString(cwdRequested)
	if err != nil {
		return err
	}
	info, err := os.Stat(cwd)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return requestError("NOT_A_DIRECTORY", "cwd is not a directory", nil)
	}
	if shell == "" {
		return requestError("NO_SHELL", "this sandbox image has no shell (neither /bin/bash nor /bin/sh exists), so run_shell cannot run commands in it; the file tools (read_file, write_file, edit_file, list_dir) still work. Use an image with a shell to run commands", nil)
	}
	limit := defaultMaxOutputBytes
	if req.MaxOutputBytes > 0 {
		limit = int(req.MaxOutputBytes)
	}
	runningMutex.Lock()
	execCounter++
	marker := fmt.Sprintf("%d-%d", os.Getpid(), execCounter)
	runningMutex.Unlock()
	started := time.Now()

	stdoutRead, stdoutWrite, err := os.Pipe()
	if err != nil {
		return err
	}
	stderrRead, stderrWrite, err := os.Pipe()
	if err != nil {
		stdoutRead.Close()
		stdoutWrite.Close()
		return err
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		for _, file := range []*os.File{stdoutRead, stdoutWrite, stderrRead, stderrWrite} {
			file.Close()
		}
		return err
	}
	process, err := startAsSandboxUser([]string{shell, "-c", req.Command}, cwd, commandEnvironment(req.Env, marker), []*os.File{devNull, stdoutWrite, stderrWrite})
	devNull.Close()
	stdoutWrite.Close()
	stderrWrite.Close()
	if err != nil {
		stdoutRead.Close()
		stderrRead.Close()
		return err
	}
	command := &runningCommand{pid: process.Pid, marker: marker}
	key := runningKey(req)
	runningMutex.Lock()
	running[key] = command
	runningMutex.Unlock()

	stdout := newCapture(limit)
	stderr := newCapture(limit)
	var readers sync.WaitGroup
	drain := func(pipe *os.File, capture *headTailCapture) {
		defer readers.Done()
		buffer := make([]byte, 64*1024)
		for {
			read, err := pipe.Read(buffer)
			if read > 0 {
				capture.push(buffer[:read])
			}
			if err != nil {
				return
			}
		}
	}
	readers.Add(2)
	go drain(stdoutRead, stdout)
	go drain(stderrRead, stderr)

	var timer *time.Timer
	if req.TimeoutMs > 0 {
		timer = time.AfterFunc(time.Duration(req.TimeoutMs*float64(time.Millisecond)), func() {
			command.mark(true)
			killTree(command)
		})
	}
	go func() {
		state, waitErr := process.Wait()
		// A kill of this command's tree (timeout, kill, stop_all) that
		// ended the shell is still running: answer once it is done, with
		// the whole tree gone.
		processLock.Lock()
		processLock.Unlock()
		// A background process that kept our pipes open must not hold the
		// answer: give the pipes a moment to drain, then answer with what we have.
		drained := make(chan struct{})
		go func() {
			readers.Wait()
			close(drained)
		}()
		// After a kill the tree is gone and the pipes end at once; the short
		// grace only lets the readers empty what the pipes still hold.
		timedOut, killed := command.state()
		grace := 200 * time.Millisecond
		if timedOut || killed {
			grace = 50 * time.Millisecond
		}
		select {
		case <-drained:
		case <-time.After(grace):
			stdoutRead.Close()
			stderrRead.Close()
			<-drained
		}
		stdoutRead.Close()
		stderrRead.Close()
		if timer != nil {
			timer.Stop()
		}
		runningMutex.Lock()
		delete(running, key)
		runningMutex.Unlock()
		var exitCode interface{}
		var signalName interface{}
		if waitErr != nil {
			exitCode = 127
			stderr.push([]byte(waitErr.Error()))
		} else if status, ok := state.Sys().(syscall.WaitStatus); ok && status.Signaled() {
			signalName = nameOfSignal(status.Signal())
		} else {
			exitCode = state.ExitCode()
		}
		timedOut, _ = command.state()
		respond(map[string]interface{}{
			"exitCode":    exitCode,
			"signal":      signalName,
			"stdout":      stdout.text(),
			"stderr":      stderr.text(),
			"stdoutBytes": stdout.total,
			"stderrBytes": stderr.total,
			"truncated":   stdout.truncated() || stderr.truncated(),
			"timedOut":    timedOut,
			"durationMs":  time.Since(started).Milliseconds(),
		})
	}()
	return nil
}

var signalNames = []string{"", "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
	"SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT",
	"SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH",
	"SIGIO", "SIGPWR", "SIGSYS"}

func nameOfSignal(signal syscall.Signal) string {
	if int(signal) > 0 && int(signal) < len(signalNames) {
		return signalNames[signal]
	}
	return fmt.Sprintf("SIG%d", int(signal))
}

func killTree(command *runningCommand) {
	marker := command.marker
	killMatching(&marker, command.pid)
}

// Before the host touches the worktree (commit), nothing the agent started may
// still run: a background process could swap a directory for a symlink while
// host git reads it.
func stopAllOp() interface{} {
	runningMutex.Lock()
	for _, command := range running {
		command.mark(false)
	}
	runningMutex.Unlock()
	return map[string]interface{}{"stopped": killMatching(nil, 0)}
}

func killOp(req *request) interface{} {
	runningMutex.Lock()
	command := running[string(req.ExecID)]
	runningMutex.Unlock()
	if command == nil {
		return map[string]interface{}{"killed": false}
	}
	command.mark(false)
	killTree(command)
	return map[string]interface{}{"killed": true}
}

// A process started with `docker exec` for Sandbox.spawn (an MCP server)
// carries a marker of its own (spawn-<id>), so another command's timeout
// spares it; this kills it and everything it started.
func killSpawnedOp(req *request) (interface{}, error) {
	var marker string
	if json.Unmarshal(req.Marker, &marker) != nil || !spawnMarker.MatchString(marker) {
		return nil, requestError("BAD_REQUEST", "marker must look like spawn-<id>", nil)
	}
	return map[string]interface{}{"stopped": killMatching(&marker, 0)}, nil
}
