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
// Upgrade: stargate-link/2) on the gateway's own port, so nothing else needs
// opening; a backend that answers anything but 101 (an engine, an older
// gateway) is remembered as plain HTTP for a while and reached through the
// fallback transport. To an https gateway the link runs inside TLS: with
// DialTLS set (the router's verifying dialer, package tlsconf) the upgrade is
// asked for on a connection past a verified handshake, and the gateway's
// side, an upgraded connection of its HTTPS listener, is TLS already;
// without DialTLS, https goes through the fallback. Transport is the
// router's side (an http.RoundTripper); Server is the gateway's (an
// http.Handler that serves each stream with the gateway's own handler, so
// the request path is the same either way).
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
//	WINDOW   router->gateway  the stream's reader took this many more bytes
//
// Flow control is per stream, as HTTP/2's: a gateway may send StreamWindow
// body bytes on a stream beyond what the router's reader has taken, and
// WINDOW frames reopen the window as it reads. A slow reader therefore
// holds up its own stream only (the gateway's handler waits in Write, as it
// would on a slow TCP connection, and stops reading from the engine), and
// the router buffers at most StreamWindow bytes per stream. Short answers,
// most of the traffic, never fill a window and send no WINDOW frame.
// Besides, the gateway's writes wait when the connection's queue is full.
package link
