// Package config turns YAML fleet files into the cores' own configuration
// types, with defaults, strict decoding (an unknown key is an error, reported
// with its line) and validation. It also holds the built-in fleets: hetero
// and homo of the routing study, and three-site, the SLO matrix's nine GPUs
// in three sites (examples/ spells each out as a file).
//
// A fleet file looks like this (every section but regions is optional and
// defaults to the routing study's values):
//
//	engine: half              # default engine profile: half, full or a name from profiles
//	profiles:                 # custom engine profiles
//	  big: {base_ms: 4, per_decode_seq_ms: 0.085, per_prefill_token_ms: 0.05, kv_tokens: 1000000, max_seqs: 25}
//	client_latency: 1ms       # one-way, client to its router
//	regions:
//	  - name: usw2
//	    routers: 3
//	    rtt_ms: {usw2: 1, ue1: 64}   # round trips (one-way = half); to itself: 0 if left out
//	    backends:
//	      - {name: usw2-0, gpus: 7}
//	      - {name: usw2-1, gpus: 4, profile: big}
//	gateway: {slots_per_worker: 25, max_estimated_wait: 10s}
//	policy: {affinity_wait: 300ms, band_step: 300ms, max_wait: 4s, max_queued: 4, virtual_nodes: 150}
//	workload: {system_prompt_tokens: 4000, turns_min: 5, turns_max: 40, think_time_mean: 5s}
//	client: {ttft_slo: 10s, attempt_timeout: 30s, max_attempts: 3}
//	router: {heartbeat_ttl: 750ms}   # fail a backend not heard from this long (default 0: liveness off)
//
// The policy name, the request rate, the seed and the window lengths are run
// parameters, given on the command line.
package config
