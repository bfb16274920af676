package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

const (
	// prctl(2) PR_CAPBSET_DROP.
	prCapbsetDrop = 24
	// capability(7) CAP_SETPCAP: needed to drop from the bounding set.
	capSetpcap = 8
)

// dropBoundingCapabilities takes CAP_SETUID, CAP_SETGID and then CAP_SETPCAP
// (the one that allows it) out of the bounding set of every thread of the
// helper, and CAP_SETPCAP out of its permitted set. Every process it starts
// inherits that bounding set, so the agent's processes hold no capability
// even in their bounding set (CapBnd 0). The helper itself keeps SETUID and
// SETGID in its permitted set, which the bounding set does not limit
// (capabilities(7): "Removing a capability from the bounding set does not
// remove it from the thread's permitted set"), to hand its commands to the
// sandbox user. Go (CGO off) runs each call on every thread
// (syscall.AllThreadsSyscall); a thread made later is cloned from one of them.
func dropBoundingCapabilities() error {
	for _, capability := range []uintptr{capSetuid, capSetgid, capSetpcap} {
		if _, _, errno := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, prCapbsetDrop, capability, 0); errno != 0 {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w (the container needs CAP_SETPCAP)", capability, errno)
		}
	}
	header := capabilityHeader{version: capabilityVersion3}
	var data [2]capabilityData
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return os.NewSyscallError("capget", errno)
	}
	data[0].permitted &^= 1 << capSetpcap
	data[0].effective &^= 1 << capSetpcap
	data[0].inheritable &^= 1 << capSetpcap
	if _, _, errno := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return os.NewSyscallError("capset", errno)
	}
	return nil
}

// spawnAsSandboxUser is the helper's second mode (`-spawn`): a Docker exec
// runs it as root with argv after `--`, for a process whose stdio the runner
// attaches directly (an MCP server in the sandbox). It drops the bounding
// set as the daemon does, becomes the sandbox user in all three ids (which
// clears every capability), enters `dir` as that user and executes the
// command in its place, found on $PATH like execvp(3). It returns only on
// failure: exit 126 when the command cannot run, 127 when it is not found,
// 70 when the credentials could not be changed.
func spawnAsSandboxUser(dir string, argv []string) {
	fail := func(code int, format string, values ...interface{}) {
		fmt.Fprintf(os.Stderr, "agent-runner-sandboxd: "+format+"\n", values...)
		os.Exit(code)
	}
	if len(argv) == 0 {
		fail(70, "-spawn needs a command after --")
	}
	if err := dropBoundingCapabilities(); err != nil {
		fail(70, "cannot drop the bounding set: %v", err)
	}
	if err := syscall.Setgroups([]int{}); err != nil {
		fail(70, "setgroups: %v", err)
	}
	if err := syscall.Setresgid(sandboxGID, sandboxGID, sandboxGID); err != nil {
		fail(70, "setresgid: %v", err)
	}
	if err := syscall.Setresuid(sandboxUID, sandboxUID, sandboxUID); err != nil {
		fail(70, "setresuid: %v", err)
	}
	if err := os.Chdir(dir); err != nil {
		fail(126, "cannot enter %s: %v", dir, err)
	}
	path, err := lookPath(argv[0])
	if err != nil {
		fail(127, "%s: %v", argv[0], err)
	}
	err = syscall.Exec(path, argv, os.Environ())
	fail(126, "%s: %v", argv[0], err)
}

// lookPath finds `name` as execvp(3) does: a name with a slash as it is, else
// the first executable file of that name in $PATH.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, directory := range filepath.SplitList(os.Getenv("PATH")) {
		if directory == "" {
			directory = "."
		}
		candidate := filepath.Join(directory, name)
		if info, err := os.Stat(candidate); err == nil && info.Mode().IsRegular() && syscall.Access(candidate, 1) == nil {
			return candidate, nil
		}
	}
	return "", errors.New("not found on PATH")
}
