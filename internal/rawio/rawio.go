package rawio

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Read makes one read(2) on fd into p, which must not be empty, again if a
// signal interrupted it.
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		if n, errno := sysRead(fd, p); errno != syscall.EINTR {
			return n, errno
		}
	}
}

// Write makes one write(2) on fd from p, which must not be empty, again if a
// signal interrupted it.
func Write(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		if n, errno := sysWrite(fd, p); errno != syscall.EINTR {
			return n, errno
		}
	}
}

// WriteAll writes all of p inside one syscall.RawConn.Write, waiting on the
// poller while the socket's buffer is full.
func WriteAll(rc syscall.RawConn, p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			n, e := Write(fd, p[written:])
			switch e {
			case 0:
				written += n
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err == nil && errno != 0 {
		err = os.NewSyscallError("write", errno)
	}
	return written, err
}

// Conn is a TCP connection whose Read and Write make raw system calls.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn
}

// Wrap returns c as a *Conn if it is a TCP connection, else c itself.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok || !Supported {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &Conn{TCPConn: tc, rc: rc}
}

// Read reads as net.Conn's Read does: it tries the socket, then waits for
// the poller if it is empty.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		n, errno = Read(fd, p)
		return errno != syscall.EAGAIN
	})
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, as net.Conn's Write does.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := WriteAll(c.rc, p)
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// opError wraps err as net.Conn's methods do. syscall.RawConn's own errors
// (a deadline, a closed connection) come wrapped for a "raw-read" or
// "raw-write"; their cause keeps its identity.
func (c *Conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Dialer returns d's DialContext with each TCP connection it makes wrapped
// in a Conn.
func Dialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Wrap(c), nil
	}
}

// Listener wraps each TCP connection it accepts in a Conn.
type Listener struct{ net.Listener }

// Accept waits for the next connection and wraps it.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
