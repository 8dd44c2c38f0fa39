//go:build unix && (!linux || race)

package rawio

import (
	"errors"
	"syscall"
)

// Supported says whether this platform's sockets are read and written
// through this package. Here they are, with syscall's own calls: the raw
// ones are for Linux, and a race-detector build keeps syscall's
// annotations so that it sees races on the buffers.
const Supported = true

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errno(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errno(err)
}

// Peek looks at a socket without taking from it or waiting: EAGAIN means
// it is open with nothing to read; 0 means a byte or the peer's end is
// waiting; anything else is the socket's error.
func Peek(fd uintptr) syscall.Errno {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return errno(err)
}

func errno(err error) syscall.Errno {
	var e syscall.Errno
	if err == nil || !errors.As(err, &e) {
		return 0
	}
	return e
}
