// Command statsload loads one live router replica the way a large fleet
// does: many gateways, each sending its signed stats message every
// interval (the wire format and signatures of serve/gatewayd), while a
// client routes requests through the router. Every gateway's address is a
// loopback listener of this process, whose small server answers the
// router's requests and probes and counts each gateway's requests, so the
// stats carry true received counts. It reports the router process's CPU
// per stats message and its memory (from /proc), and the latency of the
// requests routed while the stats flow. BENCHMARKS.md shows
// how bench/router-scale.sh runs it.
package main
