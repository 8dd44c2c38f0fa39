// Package rawio reads and writes non-blocking sockets with raw system calls,
// without the scheduler's bookkeeping for a call that might block.
//
// Go wraps each read and write of a socket in entersyscall and exitsyscall,
// as it does every system call. On a socket they never block (the runtime
// polls for readiness instead), yet entering one is where the runtime wakes
// its system monitor thread when that sleeps because every P was idle.
// A proxy on one core idles between the steps of the engine, so each burst
// of work began with that wake-up, and the monitor then polled every 20 us
// until the process idled again: about three futex and three nanosleep
// calls and five context switches per proxied request in the paced proxy
// benchmark. syscall.RawSyscall skips the bookkeeping; it is meant for calls
// that do not block, which is what a call on a non-blocking socket is.
// BENCHMARKS.md ("Proxy path") has the measurements.
//
// Conn wraps a *net.TCPConn so that its Read and Write go this way and keep
// net.Conn's behaviour: deadlines, Close from another goroutine, io.EOF,
// errors as *net.OpError. Listener wraps the connections it accepts, so an
// http.Server over it serves with them (and a connection it hands over on
// Hijack is one). Read, Write and Peek are the bare calls, for code that
// already runs inside syscall.RawConn's Read, Write or Control (package h1).
//
// The raw calls are Linux's. Other Unix systems, and race-detector builds
// (whose annotations on the buffers syscall's own calls carry), use
// syscall.Read and syscall.Write the same way. Elsewhere Supported is false
// and Wrap, Listener and Dialer leave connections as they are.
package rawio
