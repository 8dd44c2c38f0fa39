// Package router is the placement core of one router replica (Stargate).
//
// A Router holds its view of every backend, built from the gateway stats that
// reach it, plus its own dispatches that those stats do not yet include: each
// stats message carries, per router, how many of that router's requests the
// gateway has received, so pending = dispatched - received exactly. Pending
// counts rise at pick time, so a burst does not pile onto the backend that
// looked idlest a moment ago.
//
// Requests a policy asks to wait stay in the router's queue, first come first
// served. They are asked again when a stats message shows a free slot, and
// when their deadline (the policy's Decision.Until) passes. Under a
// policy.Watcher only those whose answer may have changed are asked (the
// freed backend is one their wait watches, or a backend's eligibility,
// weight, limit or models changed since); under a policy.Tracker the core
// tells the policy of every change of a view, so it picks over an index
// instead of scanning. Neither changes a decision; with them a stats message
// and a pick cost about the same at 20 backends and at 10,000 (pressure's
// own pick aside; pulsar-waw's grows with log n above 256 backends, where
// it ranks by policy's rank tree, kept current the same way).
//
// Backends are named by a BackendID for their whole life; Add and Remove
// change membership without touching any other backend's state (a policy
// with per-backend state follows through policy.Membership). Route is the
// one entry point for placing. Retry is the rule for placing a request again
// after a refusal before its first byte, shared by the live router and the
// simulator.
//
// Placement is model-aware (Serves): a request that names a model goes only
// to the backends whose /v1/models lists it, or that list none; the policy
// weighs those as a pool of their own.
//
// A Router is not safe for concurrent use; time is passed in by the caller.
package router
