//go:build linux && !race

package rawio

import (
	"syscall"
	"unsafe"
)

// Supported says whether this platform's sockets are read and written the
// raw way; elsewhere Wrap, Listener and Dialer leave connections as they
// are.
const Supported = true

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), errno
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(n), errno
}

// Peek looks at a socket without taking from it or waiting: EAGAIN means
// it is open with nothing to read; 0 means a byte or the peer's end is
// waiting; anything else is the socket's error.
func Peek(fd uintptr) syscall.Errno {
	var b byte
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b)), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return errno
}
