package main

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// requestFailure is an answer the runner translates (sandbox-channel.ts
// translateError): its code, message and extra fields go into the response.
type requestFailure struct {
	code    string
	message string
	extra   map[string]interface{}
}

func (failure *requestFailure) Error() string { return failure.message }

func requestError(code, message string, extra map[string]interface{}) error {
	return &requestFailure{code: code, message: message, extra: extra}
}

// errnoNames and errnoTexts give file-system errors the code and text the Node
// daemon gave them (libuv's uv_err_name and uv_strerror), e.g.
// "ENOSPC: no space left on device, write": the model and the tests read them.
var errnoNames = map[syscall.Errno]string{
	syscall.EPERM: "EPERM", syscall.ENOENT: "ENOENT", syscall.ESRCH: "ESRCH", syscall.EIO: "EIO",
	syscall.EBADF: "EBADF", syscall.EAGAIN: "EAGAIN", syscall.ENOMEM: "ENOMEM", syscall.EACCES: "EACCES",
	syscall.EBUSY: "EBUSY", syscall.EEXIST: "EEXIST", syscall.EXDEV: "EXDEV", syscall.ENOTDIR: "ENOTDIR",
	syscall.EISDIR: "EISDIR", syscall.EINVAL: "EINVAL", syscall.EMFILE: "EMFILE", syscall.ENFILE: "ENFILE",
	syscall.ETXTBSY: "ETXTBSY", syscall.EFBIG: "EFBIG", syscall.ENOSPC: "ENOSPC", syscall.EROFS: "EROFS",
	syscall.EMLINK: "EMLINK", syscall.ENAMETOOLONG: "ENAMETOOLONG", syscall.ENOTEMPTY: "ENOTEMPTY",
	syscall.ELOOP: "ELOOP", syscall.EDQUOT: "EDQUOT", syscall.ENXIO: "ENXIO", syscall.EOVERFLOW: "EOVERFLOW",
}

var errnoTexts = map[syscall.Errno]string{
	syscall.EPERM: "operation not permitted", syscall.ENOENT: "no such file or directory", syscall.EIO: "i/o error",
	syscall.EACCES: "permission denied", syscall.EBUSY: "resource busy or locked", syscall.EEXIST: "file already exists",
	syscall.EXDEV: "cross-device link not permitted", syscall.ENOTDIR: "not a directory",
	syscall.EISDIR: "illegal operation on a directory", syscall.EINVAL: "invalid argument",
	syscall.EMFILE: "too many open files", syscall.ETXTBSY: "text file is busy", syscall.EFBIG: "file too large",
	syscall.ENOSPC: "no space left on device", syscall.EROFS: "read-only file system",
	syscall.ENAMETOOLONG: "name too long", syscall.ENOTEMPTY: "directory not empty",
	syscall.ELOOP: "too many symbolic links encountered", syscall.EDQUOT: "disk quota exceeded",
}

// Go's operation names where Node's differ.
var syscallNames = map[string]string{"readdirent": "scandir", "fstat": "fstat"}

func errnoOf(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno, true
	}
	return 0, false
}

func isNotExist(err error) bool {
	errno, ok := errnoOf(err)
	return ok && (errno == syscall.ENOENT || errno == syscall.ENOTDIR)
}

// errorBody is the `error` member of a failed response.
func errorBody(err error) map[string]interface{} {
	var failure *requestFailure
	if errors.As(err, &failure) {
		body := map[string]interface{}{"code": failure.code, "message": failure.message}
		for key, value := range failure.extra {
			body[key] = value
		}
		return body
	}
	errno, ok := errnoOf(err)
	if !ok {
		return map[string]interface{}{"code": "ERROR", "message": err.Error()}
	}
	name := errnoNames[errno]
	if name == "" {
		name = "E" + errno.Error()
	}
	text := errnoTexts[errno]
	if text == "" {
		text = errno.Error()
	}
	message := name + ": " + text
	var pathError *fs.PathError
	var linkError *os.LinkError
	var syscallError *os.SyscallError
	switch {
	case errors.As(err, &pathError):
		message += ", " + nodeSyscall(pathError.Op) + " '" + pathError.Path + "'"
	case errors.As(err, &linkError):
		message += ", " + nodeSyscall(linkError.Op) + " '" + linkError.Old + "' -> '" + linkError.New + "'"
	case errors.As(err, &syscallError):
		message += ", " + nodeSyscall(syscallError.Syscall)
	}
	return map[string]interface{}{"code": name, "message": message}
}

func nodeSyscall(op string) string {
	if name, ok := syscallNames[op]; ok {
		return name
	}
	return op
}
