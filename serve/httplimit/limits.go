package httplimit

import (
	"errors"
	"fmt"
	"time"
)

// Limits bound one listener. The zero value of a field means no limit, except
// in Validate's checks; DefaultLimits gives the defaults.
type Limits struct {
	// ReadHeaderTimeout bounds the time to send a request's header (and the
	// TLS handshake).
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds the time to send a request's body, from the
	// end of its header.
	BodyReadTimeout time.Duration
	// WriteTimeout bounds each write to the client.
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once.
	MaxConns int
	// LargeBody is the size above which a body is large; MaxLargeBodies
	// bounds the requests with large bodies served at once. A body takes
	// its slot once more than LargeBody bytes of it have arrived.
	LargeBody      int64
	MaxLargeBodies int
	// MaxBodyMemory bounds the memory of the large bodies served at once:
	// each is charged BodyMemoryFactor times its bytes as they arrive; a
	// request beyond it is answered 503 with Retry-After at once (a
	// declared length that does not fit what is left, before its body is
	// read), never kept waiting. 0: no bound but MaxLargeBodies.
	MaxBodyMemory int64
}

// DefaultLimits are the listeners' defaults:
//
//   - ReadHeaderTimeout 10 s: a header is a few hundred bytes; ten seconds
//     covers a TLS handshake over a lossy intercontinental path.
//   - BodyReadTimeout 20 s: the largest body (8 MiB) at 3.4 Mbit/s; an
//     ordinary prompt (100 KiB) needs 40 kbit/s. A client that trickles its
//     body holds a connection for 20 s at most, not until it is done.
//   - WriteTimeout 30 s per write: a write waits only when the socket's
//     buffers (hundreds of KiB to MiB) are full, that is when the client
//     stopped reading; half a minute forgives a stalled mobile link.
//   - IdleTimeout 120 s: longer than the clients' own idle limits (Go's
//     90 s, httpx's 5 s), so the client closes first and never sends a
//     request into a connection the server is closing.
//   - MaxHeaderBytes 64 KiB: headers with API keys, signatures and session
//     ids are below 4 KiB.
//   - MaxConns 4096: about 32 KiB each (goroutine, buffers, TLS state), so
//     at most about 128 MiB in connections, and below common descriptor
//     limits; a router proxying 200 streams uses a few hundred.
//   - LargeBody 1 MiB, MaxLargeBodies 16: a 128K-token prompt is about
//     512 KiB and stays below.
//   - MaxBodyMemory 256 MiB: large bodies of 64 MiB in all at once (8 of
//     the largest, 8 MiB), their parsing and the collector's headroom
//     included (BodyMemoryFactor); a router or gateway then stays within
//     a few hundred MiB however many large bodies arrive.
func DefaultLimits() Limits {
	return Limits{ReadHeaderTimeout: 10 * time.Second, BodyReadTimeout: 20 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10, MaxConns: 4096, LargeBody: 1 << 20, MaxLargeBodies: 16,
		MaxBodyMemory: 256 << 20}
}

// Validate says what is wrong with l.
func (l Limits) Validate() error {
	var errs []error
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--read-header-timeout", l.ReadHeaderTimeout}, {"--body-read-timeout", l.BodyReadTimeout},
		{"--write-timeout", l.WriteTimeout}, {"--idle-timeout", l.IdleTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive: a listener without it can be held open by a client that sends or reads nothing", d.flag, d.v))
		}
	}
	if l.MaxHeaderBytes < 1024 {
		errs = append(errs, fmt.Errorf("max header bytes %d must be at least 1024", l.MaxHeaderBytes))
	}
	if l.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("--max-connections %d must be at least 1", l.MaxConns))
	}
	if l.LargeBody < 1 || l.MaxLargeBodies < 1 {
		errs = append(errs, fmt.Errorf("--large-body-bytes %d and --max-large-bodies %d must be at least 1", l.LargeBody, l.MaxLargeBodies))
	}
	if l.MaxBodyMemory != 0 && l.MaxBodyMemory/BodyMemoryFactor < l.LargeBody {
		errs = append(errs, fmt.Errorf("--max-body-memory %d must be 0 (no bound) or at least %d times --large-body-bytes %d: each large body is charged %d times its size",
			l.MaxBodyMemory, BodyMemoryFactor, l.LargeBody, BodyMemoryFactor))
	}
	return errors.Join(errs...)
}
