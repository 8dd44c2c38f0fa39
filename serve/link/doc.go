// Package link carries a router's requests to a Stargate gateway over one
// long-lived TCP connection that multiplexes every stream, instead of one
// HTTP/1.1 connection per request in flight.
//
// Why: on an HTTP/1.1 hop every streamed event costs the gateway one write
// and the router two reads (one that finds nothing and one that gets it),
// and wakes each process on its own. On a link the gateway writes the events
// of all streams that are ready together in one write, and the router reads
// them in one read; at 200 streams that removes most of the system calls and
// context switches of the router-gateway hop (BENCHMARKS.md, "Proxy path").
//
// The router opens a link with an HTTP/1.1 upgrade (GET /v1/stargate/link,
// Upgrade: stargate-link/1) on the gateway's own port, so nothing else needs
// opening; a backend that answers anything but 101 (an engine, an older
// gateway) is remembered as plain HTTP for a while and reached through the
// fallback transport. Transport is the router's side (an http.RoundTripper);
// Server is the gateway's (an http.Handler that serves each stream with the
// gateway's own handler, so the request path is the same either way).
//
// Frames are a 9-byte header (type, stream id, payload length, big-endian)
// and a payload:
//
//	REQUEST  router->gateway  method, request URI, host, headers, body
//	RESPONSE gateway->router  status, headers
//	DATA     gateway->router  response body bytes
//	END      gateway->router  end of the response; a non-empty payload is an
//	                          error (before RESPONSE: the request failed)
//	RESET    router->gateway  the router no longer wants the stream
//	GOAWAY   gateway->router  take no new streams here (shutting down)
//
// There is no per-stream flow control: the gateway's writes wait when the
// connection's queue is full, and a router stream whose reader falls
// MaxStreamBuffer behind is failed rather than stalling the others.
package link
