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
// A Router is not safe for concurrent use; time is passed in by the caller.
package router
