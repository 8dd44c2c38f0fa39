// Package gatewayd is the live shell of one backend's gateway (Stargate): it
// runs the gateway admission core and the per-worker slots in front of an
// engine and proxies admitted requests to it.
//
// The engine is one URL serving several workers (a stargate engine: the
// gateway names the worker in the X-Stargate-Worker header) or one URL per
// GPU worker. Either way the gateway picks the worker with the cluster
// picker (cluster.Pick) over its own record of each worker: the requests it
// holds, the prompt tokens they occupy, and the sessions it served last.
//
// A request is admitted, queued or rejected by the core; a rejection is a 503
// with Retry-After. An admitted request takes a worker permit (package
// gateway's Slots), is forwarded with every read flushed at once (a read
// that ends with [DONE] leaves with the end of the body), and gives
// the permit back when it ends. An uncertain end (the engine connection was
// lost, or no byte came for UpstreamIdleTimeout, after the request was sent)
// quarantines the worker: it takes nothing until its requests have drained
// and the engine answers a signed idle fence (POST /admin/fence), or an
// operator releases it (POST /admin/workers/{id}/release, signed with the
// gateway's HMAC key). A health check alone never restores a worker.
//
// Requests reach the engines through net/http: a transport of the
// gateway's own (kept connections closed after 4 s, before uvicorn's 5 s
// keep-alive), or the Config's Transport (the fleet's simulated network
// paths). With EngineTransport h1 they go through package h1's client
// instead, which reads a streamed answer with fewer system calls (plain
// http:// engines on Unix only). The two behave alike: the same refusals
// (a request not sent whole is a *h1.NotSentError), the same idle timeout
// (time spent writing to a slow client not counted), the same uncertain
// ends.
//
// Routers reach the gateway over HTTP/1.1 or over HTTP/2 without TLS (h2c
// with prior knowledge) on the same port (Handler); over TLS, HTTP/2 is the
// http.Server's own where ALPN offers it. An HTTP/2 connection carries at
// most 1000 streams, is pinged after 30 s of silence and closed when a ping
// goes unanswered for 15 s. Start's context ending drains the h2c
// connections (GOAWAY; 5 s for the streams in flight); CloseRouterConns
// drops them at once.
//
// The gateway scrapes the engine's /metrics (vLLM's names) and sends every
// router its stats, signed, whenever they change (coalesced) and at least
// every heartbeat interval; the first message registers the backend.
//
// Every request the gateway accepts ends as exactly one of completed, failed
// (with its reason) or rejected (with its reason); Counts and
// stargate_gateway_requests_total report them.
//
// In front of engines not written for Stargate (vLLM, SGLang; see
// EngineOptions and docs/real-engines.md): quarantined workers and engines
// that do not answer leave the capacity the stats report (with none the
// backend reports Loading); every wait ends after MaxQueueWait with 503 and
// Retry-After; a quarantine logs the stargate admin release command and
// shows in stargate_gateway_quarantined_workers; RecoverOnRestart (opt-in)
// releases a worker whose engine restarted and ran nothing over consecutive
// scrapes; slots per worker are learned where the engine says its limit;
// EngineAPIKey goes upstream as a bearer token.
//
// A Server is safe for concurrent use.
package gatewayd
