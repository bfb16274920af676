package main

import (
	"encoding/json"
	"os"
	"path"
	"strings"
	"syscall"
)

// diskUsageOp: what the files under `roots` occupy: allocated blocks
// (st_blocks, so a sparse file costs only what it really holds) and inodes
// (an empty file holds no block but an inode of the host's filesystem), each
// inode once, never following a link or crossing into another mount (the git
// metadata, the workspace's .git file). Runs on its own goroutine, so the
// channel keeps answering during a walk of a large tree. A directory the
// sandbox user cannot read into is not counted.
func diskUsageOp(req *request) (interface{}, error) {
	var roots []string
	valid := json.Unmarshal(req.Roots, &roots) == nil && roots != nil
	for _, root := range roots {
		valid = valid && strings.HasPrefix(root, "/")
	}
	if !valid {
		return nil, requestError("BAD_REQUEST", "roots must be absolute paths", nil)
	}
	type inode struct{ device, number uint64 }
	counted := map[inode]bool{}
	var total, inodes int64
	for _, root := range roots {
		var rootStat syscall.Stat_t
		if syscall.Lstat(root, &rootStat) != nil {
			continue
		}
		total += rootStat.Blocks * 512
		inodes++
		var pending []string
		if rootStat.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			pending = append(pending, root)
		}
		for len(pending) > 0 {
			directory := pending[len(pending)-1]
			pending = pending[:len(pending)-1]
			handle, err := os.Open(directory)
			if err != nil {
				continue // unreadable, or removed meanwhile
			}
			names, _ := handle.Readdirnames(-1)
			handle.Close()
			for _, name := range names {
				entry := path.Join(directory, name)
				var stat syscall.Stat_t
				if syscall.Lstat(entry, &stat) != nil || stat.Dev != rootStat.Dev {
					continue
				}
				isDirectory := stat.Mode&syscall.S_IFMT == syscall.S_IFDIR
				if stat.Nlink > 1 && !isDirectory {
					key := inode{stat.Dev, stat.Ino}
					if counted[key] {
						continue
					}
					counted[key] = true
				}
				total += stat.Blocks * 512
				inodes++
				if isDirectory {
					pending = append(pending, entry)
				}
			}
		}
	}
	return map[string]interface{}{"bytes": total, "inodes": inodes}, nil
}

// findCommandOp answers where `command` would be found by a Docker exec in
// this container (PATH from `env`, else the container's), or null: an MCP
// server whose command the image lacks gets a clear error instead of an exec
// failure.
func findCommandOp(req *request) (interface{}, error) {
	if req.Command == "" {
		return nil, requestError("BAD_REQUEST", "command must be a non-empty string", nil)
	}
	if strings.Contains(req.Command, "/") {
		candidate := req.Command
		if !strings.HasPrefix(candidate, "/") {
			candidate = path.Join(workspaceReal, candidate)
		}
		if isExecutableFile(candidate) {
			return map[string]interface{}{"path": candidate}, nil
		}
		return map[string]interface{}{"path": nil}, nil
	}
	searchPath, ok := req.Env["PATH"]
	if !ok {
		searchPath = os.Getenv("PATH")
	}
	for _, directory := range strings.Split(searchPath, ":") {
		if directory == "" {
			directory = "."
		}
		candidate := path.Join(directory, req.Command)
		if !strings.HasPrefix(candidate, "/") {
			candidate = path.Join(workspaceReal, candidate)
		}
		if isExecutableFile(candidate) {
			return map[string]interface{}{"path": candidate}, nil
		}
	}
	return map[string]interface{}{"path": nil}, nil
}
