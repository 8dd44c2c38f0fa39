// Package sim is the discrete-event simulator: it drives the same cores the
// live services run (engine workers, cluster picker, gateway admission,
// router and policy, workload, client rules, metrics) on a virtual clock.
//
// Events sit in a calendar queue (half-millisecond buckets over the next few
// seconds, a 4-ary heap beyond) ordered by (time, kind, sequence number), so
// simultaneous events always run in the same order and the same configuration
// and seed give the same result, byte for byte.
//
// # Network
//
// Regions are joined by one-way latencies (Config.Latency). A request goes
// from its client to the client's router (ClientLatency), from the router to
// the chosen backend's gateway (router region -> backend region), and its
// first token, completion or rejection travels back the same way. Every stats
// message a gateway sends reaches each region's routers after the latency from
// the backend's region to theirs. DefaultLatency gives the default matrix.
//
// # Sessions
//
// Sessions arrive as a Poisson process (see package workload), each in a
// region chosen uniformly among the regions that have routers, and pinned to
// one of that region's routers, chosen uniformly. A turn that times out is
// cancelled where it is: removed from its router's queue, or from its
// gateway's queue or engine at once (the cancel is not delayed by the
// network in the simulator).
//
// # Refusals before the first byte
//
// As the live router does, a router places again a request refused before
// its first byte, on a backend it has not tried, up to RouterAttempts
// backends: a refused connection (a killed backend, which the router then
// leaves out until its stats return), a connection that breaks before the
// first token, a gateway's overload answer, or a context-length refusal
// while another backend fits by the router's knowledge. The refusal travels
// back from the backend's region to the router's; the router hears how the
// attempt ended before it places it again. Only when no backend is left
// does the client see the failure (and retry by its own rules). A failure
// after the first token always reaches the client.
//
// # Workload classes (open loop)
//
// With Config.Class set, the session model gives way to the class's open
// loop: each request of its Stream arrives at its time as a turn of its own
// (with the client's attempts and retries), whatever happened to the ones
// before. A class's session (its affinity and prefix-cache key) connects
// from one region and router, chosen by a seeded hash of its key; a request
// marked Fresh reaches the engine without a session, so it neither reuses
// nor leaves a cache entry. A turn that Follows waits, if the turn before it
// in its conversation is still in flight, until that one ends. A class with
// a Lead starts that long before the warm-up; records' times and the
// windows are shifted by it.
//
// # Cool-down
//
// With Config.Cooldown set, the run goes on for that long after the
// measured window, and the metrics cover the turns that started in the
// window wherever they end; those still running at the end are counted as
// unfinished (Summary.Unfinished, Result.Unfinished).
//
// # Random streams
//
// Arrivals (and the region and router of each session), each session's turns,
// each router's policy, a class's request shapes and its sessions' regions
// draw from separate seeded generators derived from Config.Seed, so no two
// of them share a stream.
//
// The run ends at Warmup + Measure (+ Cooldown); metrics cover
// [Warmup, Warmup+Measure).
//
// # Closed loop
//
// With Config.Clients the Poisson arrivals give way to that many clients,
// each running one session at a time: a turn is sent when the previous one
// ended and the think time passed (Workload.ThinkTimeMean; zero sends at
// once), and a client starts its next session after a think time when its
// session ends, by its last turn or by a failed turn. So at most Clients
// turns are in progress at any instant, as with the fixed client count of a
// load test. Engine figures then cover the measured window only, and
// Result.Closed adds the gateway queue time of the window's admissions
// (arrival at the gateway to submission to the engine), the engine's mean
// step time, and degraded completions: completed turns that missed the TTFT
// SLO or were preempted and recomputed in the engine.
//
// # Slots per worker
//
// A gateway admits SlotsPerWorker x workers requests (Gateway.MaxConcurrency
// unset). When SlotsPerWorker is below the engine's sequence limit, each
// backend also holds the live gateway's per-worker slots (gateway.Slots, the
// same core): the worker picker prefers, among the workers with a free slot,
// the one that caches most of the prompt, the slots grant the permit (on that
// worker if it has one free), and the permit goes back when the engine
// finishes the request or it is cancelled. A session whose cached worker is
// full thus goes to another worker.
//
// # Open loop and pools
//
// With Config.Requests the sessions give way to a list of requests (a trace
// or a CDF workload), each one turn sent at its arrival time; a request
// with block hash ids uses the engines' block cache. Such a run measures the
// requests that arrive in the window, by arrival, and drains: arrivals stop
// at the window's end and the run goes on until every measured request has
// ended. Engine figures (busy %, batch, KV fill, preemptions) then leave the
// warm-up out. With Config.Pools each router replica holds one router core
// per pool; a request goes to the pool of smallest MaxTokens that holds its
// total tokens, or fails at once as too long (no retry).
//
// # Code layout
//
// sim.go holds the run: the simulation's state, the event loop and the
// dispatch of each event kind (events.go: kinds and their typed fields;
// queue.go and timers.go: the event queue, a calendar of buckets, and
// per-entity timers). The
// arrival modes are types behind one interface (arrivals.go: source, with
// poissonSessions, closedLoop, classLoop and traceReplay). attempt.go is the
// client side (sessions, turns, attempts and their ends), routerside.go the
// router replicas (placement, retries before the first byte), gatewayside.go
// the gateways and engines (admission, slots, engine steps), stats.go the
// stats messages between them, telemetry.go and faults.go the signals and
// injected faults, result.go what a run reports.
package sim
