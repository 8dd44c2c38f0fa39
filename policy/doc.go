// Package policy holds the placement policies of the router behind one small
// interface. A Policy sees one request and the router's current view of every
// backend and returns a Decision: dispatch to a backend, wait (and be asked
// again no later than a deadline, or sooner when the view changes), or reject
// as overloaded. Pick never blocks and never keeps a reference to the views.
//
// Policies are built through an explicit Registry (see NewRegistry); nothing
// registers itself.
//
// # The affinity policies
//
// A backend has a free engine slot when its active requests plus this router's
// dispatches not yet reflected in its stats are below its capacity (25 x
// workers by default). Utilization is (active + pending + waiting) / capacity.
//
// waw: a consistent-hash ring with VirtualNodes points per backend. The affine
// backend A is the first point clockwise from the session's hash. If A has a
// free slot the request goes there. Otherwise, if it is already waiting for A
// or fewer than MaxQueued requests wait at this router for A, it waits for a
// slot at A until AffinityWait after its arrival. When the wait ends, or the
// queue is full, it overflows to the backend of lowest utilization, even a full
// one (that backend's gateway queues or rejects).
//
// pulsar-waw: weighted rendezvous hashing. Backends are ranked by
// -w_b / ln(u(s,b)), u in (0,1) from a hash of session and backend, w_b the
// backend's weight. The band starts as the top-ranked backend and widens
// by one rank every BandStep of waiting. The request goes to the best-ranked
// backend in the band with a free slot; otherwise it waits, queued at its
// top-ranked backend (at most MaxQueued per backend per router). If that queue
// is full it overflows to the best-ranked backend anywhere with a free slot,
// and is rejected as overloaded if there is none. After MaxWait in total it is
// rejected as overloaded. It never overflows to a backend without a free slot.
//
// Above 256 backends (rankFlatMax) pulsar-waw ranks by a rank tree instead
// of scoring every backend: weighted rendezvous over a trie of the
// backends' keys, drawn as an exponential race from the root down (see
// rankTree). Its ranking has the same law as flat rendezvous (the first
// backend is b with probability w_b/W, and so on down the band), but not
// the same draw, so a session's backend differs from the flat ranking's;
// a weight change moves sessions only to or from the changed backend's
// subtree. The tree's depth is fixed (rankLevels), so a backend joining or
// leaving changes only its ancestors' weights at any fleet size. The top
// backend, the best-ranked free one and the band cost a few hashes per
// level instead of one per backend (the buckets, about 8 backends at
// 32,768, grow past that). pulsar-waw-tps and prefix
// rank the same way; the routing study's fleets (20 and 200 backends) rank
// flat, as before.
//
// Weights. pulsar-waw weights by the backend's configured capacity (25 x
// workers; Params.Weight = "capacity"). pulsar-waw-tps (Params.Weight =
// "max-input-tps") weights by the gateway's maximum input TPS, in our reading
// of "fallback-window input TPS, maximum weighting": the input tokens per
// second the backend would serve with all its engine slots busy, measured
// over the fallback (60 s) window as the prompt tokens of the requests that
// finished in it divided by the engine-slot seconds they held, times the
// slots. It is refreshed with every finished request and not held: a
// backend's weight is what its slots have been doing lately, not the most it
// was ever sent. A first reading took instead the highest input tokens/s the
// gateway had ever served (largest rate of its 5, 20 and 60 s windows, held
// forever). That weight feeds itself: a backend that is not saturated
// measures the load it is sent, pulsar-waw sends it load in proportion to its
// weight, and the held maximum ratchets the lucky backends up; on the
// homogeneous study fleet at 450 req/s some backends drifted to a tenth of
// the others' weight and goodput fell from 440 to 249 req/s. Per engine-slot
// second the measure does not grow with the load a backend is sent (an
// overloaded backend's slots are held longer, so it reads lower), so the
// loop is stable: pulsar-waw-tps now ties waw on the homogeneous fleet with
// a lower request CoV, as the original measurements of the policy found (see
// docs/routing.md). pulsar-waw-tps uses capacity weights for every backend
// until every eligible backend has a measured maximum (its fallback window
// holds Config.TPSMinRequests finished requests).
//
// # pressure
//
// Telemetry-aware placement (see Pressure): every signal the router holds
// about a backend is normalised and summed with weights into a score,
// projected to a level 1-100 with hysteresis, and the backend's weight is
// its capacity times that level (PlacementWeight): pulsar-waw's rendezvous
// ranking and band over those weights, the same weights the router reports
// and exports over xDS. The queue pressure is the router's own count
// (Backlog, View.Overload) and moves at the pick. The weights place new
// sessions; a session the policy has dispatched before keeps that backend,
// which holds its prefix cache, until the backend fails, cannot take it, or
// its pressure or expected TTFT says moving pays (StickyParams), so weight
// moves do not cost existing sessions their cache. The default weights and
// levels (DefaultPressureParams) come from a tuning search documented in
// docs/pressure.md; a fleet file's pressure section (Params.Pressure)
// replaces them. It asks the router to hide backends too small for a
// request, and reports its weights and fallback flags through
// WeightReporter.
//
// # The baselines
//
// round-robin cycles through the backends; random picks uniformly;
// least-request picks the fewest outstanding requests (active + pending +
// waiting, ties to the lower index); power-of-two samples two distinct
// backends and keeps the one with fewer outstanding requests. None of them
// waits.
//
// # Cost at scale
//
// Three optional interfaces let a router spend less per message and per pick
// without changing a decision: Watcher (waw, pulsar-waw) names the backends
// whose free slot would end a wait, so a router asks a waiting request again
// only when one of them frees a slot or the backends' eligibility or weights
// change; Tracker (least-request, random, waw's overflow: a segment tree;
// pulsar-waw, pulsar-waw-tps, prefix and pressure above 256 backends: the
// rank tree) keeps an index over the backends that the router keeps
// current, for picks in O(log n) (a policy never told of the views builds
// the rank tree for each pick, with the same decisions); ErrorBlind (all
// but pressure) tells the router it need not decay every backend's error
// rate before a pick. Pressure's tree holds its placement weights: a
// backend is rescored at the first pick after the router touched it or
// after the deadline at which the decay of its error rate and overload
// share could move its level (DecayAware: the router tells it the
// half-lives, and over the tree leaves the decay of the rates it reads to
// it), so its levels are those of rescoring every backend at every pick.
//
// Every policy skips backends listed in Request.Exclude (those that already
// refused this request) while any other backend is eligible. A router, live
// or simulated, fills it when it retries before the first byte; a client's
// retry is a new request through its router, so its list starts empty.
package policy
