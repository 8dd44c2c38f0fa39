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
// served. They are asked again when a stats message shows their backend with a
// free slot, and when their deadline (the policy's Decision.Until) passes.
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
