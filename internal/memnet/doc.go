// Package memnet is an in-process network: listeners registered under a
// "host:port" address, and a dial function that reaches them over net.Pipe
// instead of a socket and dials TCP for every other address.
//
// Why: when a router and a gateway run in one process (stargate router
// --gateway-engine), the router serves requests by calling the gateway's
// handler directly (router.Local), but some traffic must still travel as
// network traffic: the router's health probes, a request on a path with an
// operator's injected fault (the fault is applied by the network
// transport), or one to a static backend URL spelled otherwise. The gateway's handler is also served on a
// memnet listener by an ordinary http.Server, and the router dials it
// through Network.Dial, so that traffic takes the same code as between
// processes (HTTP/2 or HTTP/1.1, failure rules) without a
// socket. A dial to an address whose listener has closed fails like a
// refused TCP connection, so a router treats a stopped in-process gateway as
// it would a stopped remote one.
package memnet
