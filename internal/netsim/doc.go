// Package netsim adds network latency to HTTP calls in-process (Stargate):
// netem is not available everywhere a fleet runs, and a fleet on loopback
// still needs the WAN round trips between its regions.
//
// A Transport delays each request by the one-way latency to its destination
// before sending it, and the response by the same latency before handing it
// back, so a round trip costs two one-way latencies; streamed bytes after the
// headers follow without further delay (they are already shifted). An
// optional jitter adds a uniform random extra delay to each leg.
package netsim
