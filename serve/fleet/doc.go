// Package fleet starts a whole live fleet in one process on loopback
// (Stargate): one mock engine and one gateway per backend, and router
// replicas per region, each a real HTTP server on 127.0.0.1. It takes the
// simulator's own configuration (sim.Config), so a live run and a simulated
// run of the same fleet share every setting.
//
// The regions' one-way latencies are injected in-process (package netsim)
// on the router-to-gateway and gateway-to-router paths. The services sign
// their messages with a key drawn at start.
//
// For experiments a running fleet takes faults: KillBackend crashes a
// backend's gateway and engine, SetPathJitter adds jitter to a backend's
// paths, the engines take their own (engine.Server.SetFaults), and
// Options.Hooks watch every router's dispatches and reports.
package fleet
