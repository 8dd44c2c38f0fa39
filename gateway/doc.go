// Package gateway is the admission core that sits in front of one backend
// (Pylon in the project's first design).
//
// A Gateway admits up to MaxConcurrency requests to the engine (by default
// SlotsPerWorker = 25 per worker, the default engine profiles' sequence
// limit), queues the rest first come first
// served, and rejects with ErrOverloaded when the queue no longer matches the
// backend's speed:
//
//	estimated_wait = (waiting + 1) * mean_service_time / max_concurrency
//
// where mean_service_time is an exponentially weighted mean (alpha 0.1) of the
// admitted-to-finished time of recent requests (Config.InitialServiceTime
// until the first one finishes). By Little's law that is how long the new
// request would wait for a slot. A request is rejected when the estimate
// exceeds MaxEstimatedWait (10 s) or when waiting already holds
// MaxWaitingFactor x MaxConcurrency requests (4.0 x).
//
// The gateway measures the input tokens per second it serves (prompt tokens of
// finished requests, cached or not) over three sliding windows, 5 s, 20 s and
// 60 s, of complete 250 ms buckets (the bucket being filled is left out, so a
// rate does not sag at the start of each bucket). A window counts only once it holds at least
// Config.TPSMinRequests requests; the reported InputTPS is the largest rate of
// the windows that count (maximum weighting), falling back to the 60 s window
// when none does. PeakInputTPS is the peak of InputTPS over the windows that
// count, decaying with Config.TPSPeakHalfLife (by default it never decays).
//
// MaxInputTPS, the weight pulsar-waw-tps places by, is the input tokens per
// second the backend would serve with every engine slot busy: over the 60 s
// (fallback) window, the prompt tokens of the requests that finished divided
// by the engine-slot seconds they held (admitted to finished), times
// MaxConcurrency. It is refreshed with every finished request that leaves
// the window counted, and 0 until the window first counts. Unlike the peak it
// does not follow the load a backend is sent: a backend sent little reads
// what its busy slots manage, and an overloaded one, whose requests hold
// their slots longer, reads lower.
//
// Stats go out when something changed, at most one message per StatsCoalesce
// (10 ms), and at least every HeartbeatInterval as a heartbeat.
//
// # Worker slots, quarantine and fenced recovery
//
// Slots is the per-worker side of admission: each worker holds at most
// MaxInflightPerWorker submissions (a submission keeps its permit until every
// part of it ends), at most MaxWaitingRequests wait, and the rest are
// rejected as overloaded. A SlotMode picks MaxInflightPerWorker's default:
// SlotModeEngine (25, or the engine's own limit) for LLM engines,
// SlotModeBounded (1, only 1 or 2 accepted) for the bounded worker overlap
// note's serial workers. An uncertain completion (the request was sent and
// the connection was lost, so the worker may still run it) quarantines every
// slot of that worker. The quarantine ends only after the worker's leases have
// drained and it answers a fence: the gateway's challenge carries the worker
// id, the quarantine generation and a fresh nonce, signed with HMAC-SHA256;
// the worker answers with a statement, signed with the same key, that it is
// idle at that generation for that nonce. An answer with a bad signature, for
// another generation or to any challenge but the outstanding one is rejected
// and counted. An operator may release a worker that cannot answer.
//
// # Admissible workers and the TTFT floor
//
// SetAdmissible scales capacity to the workers that can take a request (not
// quarantined, their engine answering); with none, Offer rejects and the
// stats report the backend Loading, so routers stop placing on it. Reports
// set with SetSignals carry a TTFT p95 no lower than the age of the oldest
// request without a first token: the head of the queue, and requests the
// shell marked with AwaitFirstToken until FirstToken. A stalled engine thus
// reads slow, not 0.
//
// A Gateway and Slots are not safe for concurrent use; time is passed in by
// the caller.
package gateway
