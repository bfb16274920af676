package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// maxSymlinkHops bounds both realPath and resolveInside, like the kernel's 40 (path_resolution(7)).
const maxSymlinkHops = 40

func isInside(real string) bool {
	return real == workspaceReal || strings.HasPrefix(real, workspaceReal+"/")
}

// cleanAbsolute is Node's path.resolve(base, ...parts): each absolute part
// restarts from itself, `..` and `.` are applied lexically.
func cleanAbsolute(base string, parts ...string) string {
	current := base
	for _, part := range parts {
		if strings.HasPrefix(part, "/") {
			current = part
		} else if part != "" {
			current = current + "/" + part
		}
	}
	return path.Clean("/" + current)
}

// realPath resolves every symbolic link in the absolute path `name`, one
// component at a time as the kernel does (a link's `..` applies to where the
// link points). Errors are the lstat's (ENOENT, ENOTDIR, EACCES) or ELOOP.
func realPath(name string) (string, error) {
	pending := strings.Split(strings.TrimPrefix(name, "/"), "/")
	current := "/"
	hops := 0
	for len(pending) > 0 {
		component := pending[0]
		pending = pending[1:]
		if component == "" || component == "." {
			continue
		}
		if component == ".." {
			current = path.Dir(current)
			continue
		}
		next := path.Join(current, component)
		info, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			hops++
			if hops > maxSymlinkHops {
				return "", &fs.PathError{Op: "realpath", Path: name, Err: syscall.ELOOP}
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", err
			}
			if strings.HasPrefix(target, "/") {
				current = "/"
			}
			pending = append(strings.Split(target, "/"), pending...)
			continue
		}
		current = next
	}
	return current, nil
}

// resolveInside resolves `requested` (relative to the workspace) the way the
// kernel would, inside this container: the deepest existing ancestor goes
// through realPath (so `..` and symlinks are followed), a dangling symlink is
// followed by hand (its target may be created by a write), and the
// not-yet-existing rest is appended. Refuses anything that ends up outside
// the workspace (OUTSIDE_WORKSPACE, with `resolved`).
func resolveInside(raw json.RawMessage) (string, error) {
	var requested string
	if err := json.Unmarshal(raw, &requested); err != nil || requested == "" {
		return "", requestError("BAD_PATH", "path must be a non-empty string", nil)
	}
	return resolveString(requested)
}

func resolveString(requested string) (string, error) {
	if strings.ContainsRune(requested, 0) {
		return "", requestError("BAD_PATH", "path contains a NUL byte", nil)
	}
	pending := cleanAbsolute(workspaceReal, requested)
	for hop := 0; hop < maxSymlinkHops; hop++ {
		var missing []string // deepest first
		existing := pending
		for followed := false; !followed; {
			real, err := realPath(existing)
			if err == nil {
				parts := []string{real}
				for index := len(missing) - 1; index >= 0; index-- {
					parts = append(parts, missing[index])
				}
				resolved := path.Join(parts...)
				if !isInside(resolved) {
					return "", requestError("OUTSIDE_WORKSPACE", "outside workspace", map[string]interface{}{"resolved": resolved})
				}
				return resolved, nil
			}
			if !isNotExist(err) {
				return "", err
			}
			if target, linkErr := os.Readlink(existing); linkErr == nil {
				rest := []string{target}
				for index := len(missing) - 1; index >= 0; index-- {
					rest = append(rest, missing[index])
				}
				pending = cleanAbsolute(path.Dir(existing), rest...)
				followed = true
			} else {
				if existing == "/" {
					return "", err
				}
				missing = append(missing, path.Base(existing))
				existing = path.Dir(existing)
			}
		}
	}
	return "", requestError("BAD_PATH", fmt.Sprintf("more than %d symbolic links in %q", maxSymlinkHops, requested), nil)
}

func kindOf(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "file"
	case mode.IsDir():
		return "directory"
	case mode&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

func readOp(req *request) (interface{}, error) {
	resolved, err := resolveInside(req.Path)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(resolved)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, requestError("NOT_A_FILE", "not a regular file", map[string]interface{}{"actual": kindOf(info.Mode())})
	}
	// O_NONBLOCK: a FIFO swapped in after the stat cannot hang the helper; O_NOFOLLOW: nor a link.
	file, err := os.OpenFile(resolved, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	opened, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if !opened.Mode().IsRegular() {
		return nil, requestError("NOT_A_FILE", "not a regular file", map[string]interface{}{"actual": kindOf(opened.Mode())})
	}
	size := opened.Size()
	limit := size
	if req.MaxBytes != nil && int64(*req.MaxBytes) < limit {
		limit = int64(*req.MaxBytes)
		if limit < 0 {
			limit = 0
		}
	}
	buffer := make([]byte, limit)
	offset := int64(0)
	for offset < limit {
		read, err := file.ReadAt(buffer[offset:], offset)
		offset += int64(read)
		if err != nil || read == 0 {
			break
		}
	}
	return map[string]interface{}{"path": resolved, "size": size, "content": base64.StdEncoding.EncodeToString(buffer[:offset])}, nil
}

func writeOp(req *request) (interface{}, error) {
	resolved, err := resolveInside(req.Path)
	if err != nil {
		return nil, err
	}
	content, err := base64.StdEncoding.DecodeString(req.Content)
	if err != nil {
		return nil, requestError("BAD_REQUEST", "content is not base64", nil)
	}
	mode := uint32(0o644)
	var stat syscall.Stat_t
	if err := syscall.Lstat(resolved, &stat); err == nil {
		switch stat.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			return nil, requestError("NOT_A_FILE", "not a regular file", map[string]interface{}{"actual": "directory"})
		case syscall.S_IFREG:
			mode = stat.Mode & 0o7777
		}
	} else if err != syscall.ENOENT {
		return nil, &fs.PathError{Op: "lstat", Path: resolved, Err: err}
	}
	directory := path.Dir(resolved)
	if err := os.MkdirAll(directory, 0o777); err != nil {
		return nil, err
	}
	// A fresh inode renamed over the target: a hard link or symlink that sat at
	// the target keeps pointing at the old content, never at the new bytes.
	temporary := path.Join(directory, fmt.Sprintf(".runner-write-%d-%d-%s", os.Getpid(), time.Now().UnixMilli(), strconv.FormatUint(rand.Uint64(), 36)))
	fd, err := syscall.Open(temporary, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, mode)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: temporary, Err: err}
	}
	file := os.NewFile(uintptr(fd), temporary)
	fail := func(err error) (interface{}, error) {
		file.Close()
		os.Remove(temporary)
		return nil, err
	}
	if _, err := file.Write(content); err != nil {
		return fail(&fs.PathError{Op: "write", Path: temporary, Err: unwrapErrno(err)})
	}
	// The umask took bits off at creation.
	if err := syscall.Fchmod(fd, mode); err != nil {
		return fail(&fs.PathError{Op: "chmod", Path: temporary, Err: err})
	}
	if err := file.Close(); err != nil {
		os.Remove(temporary)
		return nil, err
	}
	if err := os.Rename(temporary, resolved); err != nil {
		os.Remove(temporary)
		return nil, err
	}
	return map[string]interface{}{"path": resolved, "bytesWritten": len(content)}, nil
}

func unwrapErrno(err error) error {
	if errno, ok := errnoOf(err); ok {
		return errno
	}
	return err
}

func statOp(req *request) (interface{}, error) {
	resolved, err := resolveInside(req.Path)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(resolved)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	modified := info.ModTime()
	return map[string]interface{}{
		"path":    resolved,
		"type":    kindOf(info.Mode()),
		"size":    info.Size(),
		"mtimeMs": float64(modified.Unix())*1000 + float64(modified.Nanosecond())/1e6,
	}, nil
}

type directoryEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

func listOp(req *request) (interface{}, error) {
	resolved, err := resolveInside(req.Path)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(resolved)
	if err != nil {
		if errno, ok := errnoOf(err); ok && errno == syscall.ENOENT {
			return nil, nil
		}
		if errno, ok := errnoOf(err); ok && errno == syscall.ENOTDIR {
			return nil, requestError("NOT_A_DIRECTORY", "not a directory", nil)
		}
		return nil, err
	}
	listed := make([]directoryEntry, 0, len(entries))
	for _, entry := range entries {
		listed = append(listed, directoryEntry{Name: entry.Name(), Type: kindOf(entry.Type())})
	}
	sort.Slice(listed, func(a, b int) bool { return listed[a].Name < listed[b].Name })
	return listed, nil
}
