// Command agent-runner-sandboxd is the runner's end of the persistent channel
// into a task container (src/sandbox/docker/sandbox-channel.ts speaks to it).
//
// It reads newline-delimited JSON requests on stdin and writes one JSON
// response line per request on stdout. Keeping one process alive answers a
// tool call in well under a millisecond, where a Docker exec per call costs
// ~40 ms (bench/). When stdin closes (the runner went away, even by kill -9)
// it kills every process of the container and exits, which ends the container.
//
// It is a static binary (Go, CGO off, standard library only) bind-mounted
// read-only into every container and run as the container's command, so it
// depends on nothing in the image: no libc, no shell, no Node
// (docs/sandbox-helper.md gives the reasons and the build).
//
// Usage: agent-runner-sandboxd -uid N -gid N   (as root; the workspace root
// comes from $RUNNER_WORKSPACE, default /workspace)
//
//	agent-runner-sandboxd -uid N -gid N -spawn -dir D -- command [args...]
//	  (as root, from a Docker exec: runs the command as the sandbox user in D;
//	  see spawnAsSandboxUser)
//	agent-runner-sandboxd grep|glob   (as anyone: the grep and glob tools
//	without ripgrep, search.go)
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// version is reported by ping; bump it when the protocol or a semantic changes.
const version = "1"

var (
	sandboxUID    int
	sandboxGID    int
	workspaceReal string
	outputMutex   sync.Mutex
	output        = bufio.NewWriterSize(os.Stdout, 64*1024)
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "grep" || os.Args[1] == "glob") {
		os.Exit(searchMain(os.Args[1]))
	}
	flag.IntVar(&sandboxUID, "uid", -1, "uid the agent's commands run as (> 0)")
	flag.IntVar(&sandboxGID, "gid", -1, "gid the agent's commands run as (>= 0)")
	spawn := flag.Bool("spawn", false, "run the command after -- as the sandbox user, in place (for a Docker exec)")
	spawnDirectory := flag.String("dir", "/", "with -spawn: the command's working directory")
	flag.Parse()
	if os.Getuid() != 0 || sandboxUID <= 0 || sandboxGID < 0 {
		fmt.Fprintf(os.Stderr, "agent-runner-sandboxd must start as root with -uid/-gid set (uid %d, sandbox %d:%d)\n", os.Getuid(), sandboxUID, sandboxGID)
		os.Exit(70)
	}
	if *spawn {
		spawnAsSandboxUser(*spawnDirectory, flag.Args())
	}
	// No process the helper starts may hold SETUID or SETGID, even in its bounding set.
	if err := dropBoundingCapabilities(); err != nil {
		fmt.Fprintf(os.Stderr, "agent-runner-sandboxd: cannot drop the bounding set: %v\n", err)
		os.Exit(70)
	}
	// A write to a closed stdout must fail with EPIPE, not kill the helper
	// before it has stopped the container's processes. Notify, not Ignore: an
	// ignored signal would stay ignored in every command the helper starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	// The helper starts as root inside the container (holding only CAP_SETUID
	// and CAP_SETGID once CAP_SETPCAP went with the bounding set above; the
	// container drops every other capability) and at once
	// takes the sandbox user as its *effective* ids, keeping root as its real
	// and saved ids. Its file operations therefore run as the sandbox user
	// (files belong to it, permissions apply), while the agent's processes,
	// which run as the sandbox user in all three ids, cannot touch the helper:
	// signals (`kill -9 -1`, SIGSTOP) need a matching real or saved uid, and
	// ptrace or /proc/<pid>/{mem,environ} need matching ids *and* a dumpable
	// process; the credential change itself makes the kernel mark the helper
	// non-dumpable (fs.suid_dumpable, default 0; prctl(2) PR_SET_DUMPABLE).
	// Go (>= 1.16, CGO off) applies these calls to every thread of the process
	// (syscall.AllThreadsSyscall), so no thread is left with root as its
	// effective uid.
	if err := dropToSandboxUser(); err != nil {
		fmt.Fprintf(os.Stderr, "agent-runner-sandboxd: cannot take the sandbox user %d:%d as effective ids: %v\n", sandboxUID, sandboxGID, err)
		os.Exit(70)
	}

	workspace := os.Getenv("RUNNER_WORKSPACE")
	if workspace == "" {
		workspace = "/workspace"
	}
	real, err := realPath(cleanAbsolute("/", workspace))
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-runner-sandboxd: the workspace %s cannot be resolved: %v\n", workspace, err)
		os.Exit(70)
	}
	workspaceReal = real
	findShell()
	warmThreads(8)

	send(response{ID: json.RawMessage("0"), OK: true, Result: map[string]interface{}{"ready": true, "pid": os.Getpid(), "uid": sandboxUID}})
	serve(os.Stdin)
}

func dropToSandboxUser() error {
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(-1, sandboxGID, -1); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(-1, sandboxUID, -1); err != nil {
		return fmt.Errorf("setresuid: %w", err)
	}
	return nil
}

// serve answers requests until `input` ends, then stops every process of the
// container and exits.
func serve(input io.Reader) {
	reader := bufio.NewReaderSize(input, 1024*1024)
	for {
		line, err := reader.ReadBytes('\n')
		if len(trimLine(line)) > 0 {
			handle(trimLine(line))
		}
		if err != nil {
			break
		}
	}
	killMatching(nil, 0)
	outputMutex.Lock()
	output.Flush()
	os.Exit(0)
}

func trimLine(line []byte) []byte {
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	return line
}

type response struct {
	ID     json.RawMessage `json:"id"`
	OK     bool            `json:"ok"`
	Result interface{}     `json:"result"`
	Error  interface{}     `json:"error,omitempty"`
}

// send writes one response line; safe from any goroutine.
func send(message response) {
	if message.ID == nil {
		message.ID = json.RawMessage("null")
	}
	outputMutex.Lock()
	defer outputMutex.Unlock()
	encoder := json.NewEncoder(output)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(message); err != nil {
		// Only a result that cannot be encoded gets here; the request must still be answered.
		encoder.Encode(response{ID: message.ID, OK: false, Error: map[string]string{"code": "ERROR", "message": "response could not be encoded: " + err.Error()}})
	}
	output.Flush()
}

type request struct {
	ID             json.RawMessage   `json:"id"`
	Op             string            `json:"op"`
	Path           json.RawMessage   `json:"path"`
	MaxBytes       *float64          `json:"maxBytes"`
	Content        string            `json:"content"`
	ExecID         json.RawMessage   `json:"execId"`
	Command        string            `json:"command"`
	Cwd            *string           `json:"cwd"`
	Env            map[string]string `json:"env"`
	TimeoutMs      float64           `json:"timeoutMs"`
	MaxOutputBytes float64           `json:"maxOutputBytes"`
	Marker         json.RawMessage   `json:"marker"`
	Roots          json.RawMessage   `json:"roots"`
}

func handle(line []byte) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		send(response{OK: false, Error: map[string]string{"code": "BAD_REQUEST", "message": "request is not JSON"}})
		return
	}
	respond := func(result interface{}) { send(response{ID: req.ID, OK: true, Result: result}) }
	fail := func(err error) { send(response{ID: req.ID, OK: false, Error: errorBody(err)}) }
	answer := func(result interface{}, err error) {
		if err != nil {
			fail(err)
		} else {
			respond(result)
		}
	}
	switch req.Op {
	case "ping":
		respond(map[string]interface{}{"pid": os.Getpid(), "uid": sandboxUID, "gid": sandboxGID, "helper": version})
	case "read":
		answer(readOp(&req))
	case "write":
		answer(writeOp(&req))
	case "list":
		answer(listOp(&req))
	case "stat":
		answer(statOp(&req))
	case "exec":
		if err := execOp(&req, respond); err != nil {
			fail(err)
		}
	case "kill":
		respond(killOp(&req))
	case "stop_all":
		respond(stopAllOp())
	case "kill_spawned":
		answer(killSpawnedOp(&req))
	case "find_command":
		answer(findCommandOp(&req))
	case "disk_usage":
		go func() { answer(diskUsageOp(&req)) }()
	default:
		fail(requestError("BAD_REQUEST", "unknown op "+req.Op, nil))
	}
}
