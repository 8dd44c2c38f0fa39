// Package study runs named experiments: it expands a study into simulation
// runs, executes them in parallel on all cores, collects their results and
// writes the study's table, JSON and HTML report. It is the one package above
// the cores that measures wall time.
//
// The routing study (Routing) is the project's reference experiment, from
// docs/DESIGN.md: both study fleets, waw, pulsar-waw (and its measured-TPS variant)
// and the four baselines, at 350 and 450 req/s on the heterogeneous fleet and
// 450 and 550 req/s on the homogeneous one, seeds 1-3, 240 s of warm-up and
// 240 s measured.
//
// Resilience runs the resilience study: the phases of ResiliencePhases on
// ResilienceFleet for pressure and the baselines, through a PhaseRunner
// (SimPhaseRunner, or LivePhaseRunner on a live fleet). Per run it measures, over
// the turns that ended in the span after the onset: success rate (completed
// over ended turns), TTFT percentiles of completed turns, misroutes
// (dispatches to a backend killed, hung or over its limit), the leak rate
// (misroutes over dispatches of requests longer than the phase's limit), the
// time to detect and the time to recover. Time to detect is, for capability
// and failover, the time to the last misroute (not detected if one came in
// the last 5 s); for thermal, pcie and wan-jitter, the time to the start of the
// first 5 s in which the faulty backends got less than half their pre-fault
// dispatch rate; for telemetry-loss, the time to the first report without
// hardware signals (in telemetry-loss-each, the longest such wait after a
// backend's own exporter died; failover-ttl500 is measured as failover); for burst, the routing reaction p95: over the bursts, the
// time from a burst's onset to the first change of any router's policy
// weights (the Solyx AI Grid paper's "time from burst onset to routing weight
// adjustment"), for policies whose weights move (pressure; the others keep
// none, and show none). Time to recover is the time until every later 5 s bin
// has success >= 99% and p95 TTFT <= 1.5 x the pre-fault p95 + 0.25 s. Cells
// give means over replicates with Student-t 95% intervals. The thermal and
// pcie phases also measure the Solyx AI Grid paper's DCGM lead time
// (LeadTime, in PhaseExtras): from the faulted backend's pressure score
// reaching LeadAlertScore, or a DCGM field crossing its hardware alert
// threshold, to its TTFT p95 over LeadBreachWindow exceeding the SLO,
// censored at the end of the span when no breach comes.
//
// A live resilience study (ResilienceOptions.Live, LivePhaseRunner) runs
// every spec on a live in-process fleet at LiveScale, one at a time, with
// the faults applied to the running services at the onset, and runs each
// spec's simulator twin at the same scale; the report keeps the two apart
// (PhaseMetrics.Mode) and checks the resilience targets (long-prompt success,
// reroute p99, breaches and thermal lead time, besides the figures above) on
// each mode's runs. The reroute time (failover) is, for each turn the kill
// caught, the time from when it was caught to the dispatch to another
// backend that then served it (PhaseMetrics.RerouteP99S); turns and
// dispatches are matched by session and time, in both modes.
//
// # The SLO matrix
//
// RunSLOMatrix measures, for workload classes x policies x SLO tiers x
// replicates, the sustainable rate: the highest constant request rate at
// which P95 TTFT is within the SLO and at least 95% of requests succeed,
// found by bisection (SustainableRate) as the Solyx AI Grid paper does
// (sections 5.3-5.4, appendix A). Each step runs the class's open loop for
// 30 s of warm-up, 45 s measured and 15 s of cool-down; the turns sent in
// the measured window are the sample. Our reading of the Solyx AI Grid paper's "cool-down
// excluded from numerator and denominator": a turn still running when the
// cool-down ends counts in neither the success rate's numerator nor its
// denominator; but if it has no first token yet it enters the P95 TTFT at
// the time it had waited (over 15 s, longer than any tier's SLO), so an
// overloaded step cannot hide its slowest requests by leaving them
// unfinished. Each step's raw figures (StepFigures) are kept.
//
// A Runner measures steps: SimRunner in the simulator (with telemetry on,
// as a live fleet has it); LiveRunner starts the fleet in this process for
// each step, drives it over HTTP with the same StepSpec and turns its turn
// records into the same figures with Figures. The three tiers of one class, policy and
// replicate share the steps they have in common; those groups run in
// parallel. A cell is the median over replicates with a percentile-bootstrap
// interval, and counts only when the steps that decided it measured at least
// 500 turns in all.
//
// Overlap runs the bounded-worker overlap study: closed-loop clients (each
// sends its next turn as soon as the previous one ends) against one backend
// of four half-scale GPUs, with max_inflight_per_worker (the gateway's slots
// per worker) of 1, 2 and the default 25, at 4 to 256 clients, seeds 1-3, 30 s
// warm-up and 60 s measured. The gateway's waiting bound is 400 requests for
// every setting. Per run it measures, over the turns that ended in the
// window: requests/s and input tokens/s of completed turns, client latency
// (first send to last token) p50/p95, TTFT p95, gateway queue time (arrival
// to admission), mean engine step time, mean batch, failed turns and
// degraded completions (completed turns that missed the TTFT SLO or were
// preempted and recomputed in the engine); Winners names the best setting
// per figure and client count. LiveOverlap runs the same specs on live
// fleets, each run beside its simulator twin.
//
// LiveRouting runs the routing study's policies on live in-process fleets
// at a scale (ScaleConfig), each live run matched by a simulator run of the
// same scaled configuration and seed. The two play the same sessions: the
// live clients take the simulator's own session stream (sim.SessionPlan:
// arrival instants, session seeds, region and router of each session), and
// the simulator keys sessions as a live router keys X-Session-ID
// (sim.Config.LiveSessionKeys), so both place the same sessions on the same
// backends. What is left between them is the live fleet itself. Each pair
// keeps both sides' turns (WriteLiveRecords), the mean time a live turn took
// beyond its twin (Added), a simulator run with that added to the client
// latency (SimAdded), and the machine's load and the process's wait for
// cores over the live run.
package study
