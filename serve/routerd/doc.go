// Package routerd is the live shell of one router replica (Stargate): an
// OpenAI-compatible front door that places each request with the router
// core and proxies it to a backend's gateway.
//
// Backends come from a static list and from gateways' signed stats messages
// (POST /v1/stargate/stats), which register a backend on first sight,
// refresh its view and telemetry signals, and serve as heartbeats: the
// router core's lifecycle (Config.Liveness) fails a backend whose last
// message is older than the heartbeat TTL (1.5 s: three 500 ms heartbeats)
// and restores it when its stats return; a refused connection fails it at
// once. A static backend's heartbeat is its answered /health probe. Every
// backend is probed every ProbeInterval for the RTT and jitter signals.
// Operators drain and undrain a backend with POST
// /admin/backends/{name}/drain and /undrain, signed with the HMAC key, and
// inject a fault on this router's path to a backend with POST
// /admin/backends/{name}/path ({"rtt_ms": N, "jitter_ms": N}: each message
// waits RTT/2 plus an exponential delay of mean jitter, as the simulator's
// path fault), signed the same way; no client header can do either.
// Hooks let an in-process caller watch every dispatch and gateway report.
// The placement core is built once; backends join and leave it by a stable
// ID (router.BackendID), so a new, restarted (a new boot id) or departed
// backend leaves every other backend's state alone, and waiting requests
// are placed again. Requests read the backends from an immutable snapshot
// (an atomic.Pointer published whole on every membership change) and keep
// no position across an unlock; every lock is released with defer. /health
// answers 503 when the run loop has not gone round for DefaultStuckAfter.
//
// The session key is openai.SessionKey: X-Session-ID, else the body's user,
// else a hash of the leading messages. Proxying follows DESIGN's rules:
// internal X-Stargate- headers, hop-by-hop headers and the client's
// Authorization never pass; bodies, message counts and max_tokens are
// bounded; streamed bytes are flushed at once (but for a
// final [DONE], which leaves with the end of the body); an attempt refused before its
// first byte (503, 429, 502 or a refused connection) is retried on a backend
// not yet tried, up to MaxAttempts, by the rule the simulator shares
// (router.Retry); a client that goes away cancels the
// upstream request; a failure after the first byte ends the stream with an
// SSE error event. A prompt longer than a backend's max_model_len (from its
// stats, or learned from its context-length 400s, after which the request
// tries another backend) is never sent there while another backend fits it.
// The router core hears how every attempt ended, so errors, overload and
// context-length refusals are separate signals.
//
// With Config.HTTP2 (the default) the router reaches each http:// gateway
// over HTTP/2 without TLS (h2c with prior knowledge, net/http's
// Transport): one connection carries many streams (up to the gateway's cap
// of 1000, then another opens), and pings find a gateway gone silent.
// Whether a host speaks h2c is asked once, before its first request; a
// backend that does not (an engine, vLLM) is reached over HTTP/1.1, as
// every backend is with HTTP2 off, and https backends are too unless their
// TLS handshake negotiates h2. The retry, cancel and failure rules are the
// same either way: a connection that drops fails its streams, and a
// refused dial is a refused connection.
//
// A gateway in the router's own process (Config.Local, stargate router
// --gateway-engine) is called directly: its handler runs in the request's
// goroutine and writes to the client as it reads the engine, with the same
// retry, cancel and failure rules, and a closed one refuses like a closed
// port.
//
// Every request the router accepts ends as exactly one of completed, failed
// (with its reason) or rejected (with its reason); Counts and
// stargate_router_requests_total report them.
//
// GET /v1/stargate/backends answers AdminBackends (admin.go): every field
// names its unit, the pressures are an object by signal name. With
// Config.Console the router also serves the operator console (console.go):
// GET /console, one embedded page, updated by Server-Sent Events from GET
// /console/events at most twice a second, with a bounded ring of recent
// events. Admin reads pass one check (guardInfo).
//
// A Server is safe for concurrent use.
package routerd
