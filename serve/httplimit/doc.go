// Package httplimit bounds what a client can hold on a Stargate listener
// (router, gateway, engine): connections, idle time, the time to send a
// request's header and body, the time a response may wait for the client to
// take it, and the large request bodies held at once.
//
// Serve builds the http.Server and the listener chain (connection limit,
// raw socket I/O from package rawio, TLS from package tlsconf) and wraps the
// handler so that:
//
//   - a request body must arrive within BodyReadTimeout of its header (a
//     read deadline, cleared when the body ends, so a stream that outlives
//     it is not cut);
//   - every write to the client must complete within WriteTimeout: the
//     deadline is renewed before each write and flush, so a long stream is
//     never cut while the client reads, and a client that stops reading
//     loses its request (and the gateway slot behind it) WriteTimeout after
//     the socket's buffers filled;
//   - a body larger than LargeBody needs one of MaxLargeBodies slots for
//     as long as its request runs, and BodyMemoryFactor times its bytes of
//     MaxBodyMemory. It takes them as its bytes arrive, once more than
//     LargeBody of them have (a declared length or not), so a client that
//     stalls before sending them holds nothing but its connection. A
//     declared length that cannot be served now is refused with 503 and
//     Retry-After before any byte of it is read; one that passes when the
//     check is made, and a body of unknown length, when it passes LargeBody
//     (or the memory runs out) midway: the answer is then the refusal's,
//     and over HTTP/1 the rest of the body (up to 16 MiB) is read and
//     thrown away first, so the client sees it rather than a reset.
//
// The listener accepts at most MaxConns connections at once; further ones
// wait in the kernel's accept queue (and time out there on the client's
// side) until one closes. A connection handed over (a router's h2c
// connection to a gateway) counts until it closes, with its deadlines
// cleared.
//
// Defaults, and why: DefaultLimits.
package httplimit
