//go:build !unix

package rawio

import "syscall"

// Supported says whether this platform's sockets are read and written
// through this package. Here they are not: Wrap, Listener and Dialer leave
// connections as they are, and the calls below fail.
const Supported = false

func sysRead(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }

func sysWrite(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }

// Peek is not available here.
func Peek(uintptr) syscall.Errno { return syscall.EINVAL }
