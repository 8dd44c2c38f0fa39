// Package plan is the capacity planner: it sizes pools of serving instances
// for a workload analytically (M/G/c queueing with a numerically stable
// Erlang C and Kimura's approximation of the waiting-time tail) and checks
// the result with the discrete-event simulator that stargate sim runs.
//
// # The formulas
//
// With arrival rate lambda, mean service time 1/mu on each of c servers and
// offered load a = lambda/mu Erlangs (utilization rho = a/c < 1):
//
//	Erlang B:  B(0) = 1,  B(k) = a B(k-1) / (k + a B(k-1))
//	Erlang C:  C(c, a) = c B(c) / (c - a (1 - B(c)))      (P(wait > 0), M/M/c)
//
// The recursion stays in [0, 1] for any c, where the textbook sum of
// a^k/k! overflows past c of about 170.
//
// For general service times with squared coefficient of variation cs2,
// Kimura's approximation keeps M/M/c's probability of waiting and scales the
// exponential decay of the wait by 2 / (1 + cs2):
//
//	P(W > t) ~ C(c, a) exp(-theta t),   theta = 2 (c mu - lambda) / (1 + cs2)
//	E[W]     ~ C(c, a) / theta
//	W_q      = ln(C(c, a) / (1 - q)) / theta   if C(c, a) > 1 - q, else 0
//
// cs2 = 1 gives M/M/c exactly; cs2 = 0 (deterministic service) halves the
// M/M/c wait, as the Pollaczek-Khinchine formula does for c = 1.
//
// Size picks the fewest servers whose P99 wait meets a target and whose
// utilization stays under a cap (0.85 by default).
//
// # Pools, profiles and the analytical model
//
// A fleet is one or more pools; a pool is Instances identical backends of
// one Profile that take the requests whose total tokens (input + output)
// are at most its MaxTokens and above the next smaller pool's. A request
// longer than every pool is rejected (it is not sent to the largest pool).
// A Profile is an engine step-cost model given outright, a Manual profile
// (W, H, calibration_ctx, chunk, blk_size, total_kv_blks, max_slots,
// cost_per_hr) or a Computed one (hardware + model + serving: roofline
// prefill, memory-bound decode); Profile.EngineFor states how each maps onto
// the engine model. Presets lists the built-in ones.
//
// NewPoolModel draws the pool's requests from 3,000 samples of the workload
// and computes, at full concurrency n = Slots (the engine's sequence limit,
// or fewer if mean-sized requests fill the KV budget; see KVReserve), each request's
// service time S_j and its time to first token once admitted P_j (see
// NewPoolModel). Every KV slot is a server: c = instances x Slots, mu =
// 1/E[S], cs2 = Var[S]/E[S]^2, lambda_pool = lambda x share. A pool meets a
// P99 TTFT target T when
//
//	W_0.99(c) + P_0.99 <= T   and   lambda_pool E[S] / c <= cap
//
// with W_0.99 Kimura's P99 wait above. The model ignores prefix reuse
// (conservative) and assumes Poisson arrivals.
//
// # DES verification
//
// Evaluate runs the fleet in package sim: one region, one router, no
// network latency, each instance a backend of one engine worker behind a
// gateway; the pool router (length by default) picks the pool and the
// policy (least-request by default) the backend in it. Requests arrive open loop (drawn from the
// CDF, or the trace replayed with its block hash ids, so prefix reuse is
// real); a warm-up is left out of every figure, every request that arrives
// in the measured window is followed to its end, and a request that fails
// (rejected, too long) counts as infinitely slow in every TTFT quantile and
// against the SLO. Several seeds give a 95% confidence interval of the
// per-seed P99 (Student's t). Verify searches from the analytical sizes for
// the smallest fleet that meets the target in the DES such that one instance
// fewer in any pool does not; it stops and says why when adding instances
// stops lowering the P99 (the longest requests' own prefill exceeds the
// target) or too many requests exceed every pool.
//
// Verify's runs stop early once decided (Planner.decided): a fleet's seeds
// end at a sure miss or when the 95% interval of the P99 (per-seed, or batch
// means of one seed) lies on one side of the target; fleets expected to miss
// are screened on a quarter of the window (only a miss, and only by the
// batch-means interval, is decided there);
// Optimize prunes a candidate dearer than the best verified fleet when the
// largest fleet of its layout cheaper than the best misses. Options.AllSeeds
// turns this off.
//
// Options.KVReserve sets how slots come from the KV cache: KVMean (KV /
// the mean request), KVMaxContext (the pool's max context reserved on every
// slot, as the Fleet Sim model does) or KVPaged (the tokens in flight at
// their 99th percentile, as a paged-attention engine admits); the last two
// also charge each step the length-biased mean context of the sequences in
// flight instead of the mean over requests.
//
// The analytical model keeps a utilization cap the DES check does not: the
// DES accepts any fleet whose P99 TTFT meets the target, so a verified fleet
// may run hotter than the cap. Short measured windows understate queues that
// build slowly (long requests); use minutes and several seeds.
//
// # Pool routers
//
// A PoolRouter picks each request's pool before the policy places it
// inside the pool; PoolRouterRegistry holds the seven (ParsePoolRouter
// reads NAME[:key=value,...]): length (the smallest pool that holds the
// request: by its total tokens, an oracle, or by its prompt plus an output
// estimate known at request time, estimate=mean|median|N; a request the
// estimate puts in too small a pool has its answer cut at the pool's max
// context), compress-and-route (a request in (B, gamma B] of the pool
// below its own is shortened to fit B and sent there, paying a compression
// latency; prose and rag only in the DES, a share p of the band in the
// analytical model), spillover (by length, to the next larger pool while
// the pool's active plus queued requests per slot exceed a threshold),
// least-loaded (the least pressed pool that holds the request), model (a
// table from model to pool), semantic (a table from a classifier's
// category to pool, with a fallback; the Classifier interface is called
// once per request before a DES run, and the HTTP classifier lives in the
// command) and random. The analytical sizing routes its samples through
// the router with idle pools (so spillover and least-loaded size as length
// does); the DES calls the router at every arrival with the pools' loads
// (sim.Config.PoolRouter; none for a router that never reads them, which
// this package lists by exact type). The engine's step cost in each pool
// follows the mean shape of the requests the router sends there (see
// EngineFor), so a router that mixes short requests into a long pool
// lowers that pool's mean context and its step cost with it: a mean-field
// approximation.
//
// Disaggregate is a separate phase model (prefill and decode workers) with
// stated, configurable constants (DisaggConstants); it runs no DES.
//
// A Planner is not safe for concurrent use; its DES runs go through
// Options.Run, which may run them in parallel.
package plan
