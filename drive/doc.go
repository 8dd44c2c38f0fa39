// Package drive is the live load driver (Stargate): it plays the workload's
// growing multi-turn sessions against router URLs over HTTP with streaming,
// applying the client core's SLO, timeout and retry rules, and measures turns
// with the same metrics as the simulator.
//
// Three arrival modes, as in the simulator (sim.Config):
//   - sessions (the default) arrive as a Poisson process
//     (workload.Config.SessionRate) from a seeded generator and are spread
//     over the targets in turn;
//   - a workload class (Config.Class) sends its open loop of requests at
//     RPS, each one turn, a conversation's turn held until the one before it
//     ended; a session keeps one target, chosen by a hash of its key;
//   - a closed loop (Config.Clients) of clients, each playing one session at
//     a time and starting the next after a think time.
//
// A session ends after its last turn or after a turn that failed. A turn sends one
// chat message padded to exactly the turn's prompt tokens (by the documented
// token count of package openai) with X-Session-ID set to the session, and
// max_tokens set to the turn's output tokens. A 429 or 503 counts as a
// rejection, another error or an SSE error event as an error, and an attempt
// that runs past its timeout as a timeout; the client core decides whether to
// retry; a 400 (a prompt over the backend's context length) fails the turn
// at once. Turns that end in [warmup, warmup+measure) are measured; at the
// end of the window every turn in flight is cancelled. With a cool-down the
// run goes on past the window, the turns that started in it are measured,
// and those still running at the end are reported as unfinished.
//
// Bursts add sessions at once on top of the arrivals (the resilience
// study's burst phase), and Started tells the caller the run's time zero so
// that it can time faults on the records' clock.
package drive
