// Package memnet is an in-process network: listeners registered under a
// "host:port" address, and a dial function that reaches them over net.Pipe
// instead of a socket and dials TCP for every other address.
//
// Why: when a router and a gateway run in one process (stargate router
// --gateway-engine), the hop between them needs no kernel at all. The
// gateway's handler is served on a memnet listener by an ordinary
// http.Server, and the router dials it through Network.Dial, so the request
// path (upgrade to a link, frames, fallback, failure rules) is the same code
// as between processes; only the system calls and the wake-ups of a socket
// are gone. A dial to an address whose listener has closed fails like a
// refused TCP connection, so a router treats a stopped in-process gateway as
// it would a stopped remote one.
package memnet
