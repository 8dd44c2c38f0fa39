package sim

import (
	"time"

	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/telemetry"
)

// Result is what one run measured.
type Result struct {
	Summary  metrics.Summary
	Backends []BackendResult
	// Events is the number of events the run processed.
	Events uint64
	// Records holds the measured turns when Config.KeepRecords is set.
	Records []metrics.TurnRecord
	// Open is set for an open-loop run (Config.Requests).
	Open *OpenResult
	// Dispatches holds every dispatch when Config.RecordDispatches is set.
	Dispatches []Dispatch `json:",omitempty"`
	// Marks are notable instants of a run with telemetry or faults.
	Marks []Mark `json:",omitempty"`
	// Signals holds every backend's telemetry reports, in time order, when
	// Config.RecordSignals is set.
	Signals []SignalSample `json:",omitempty"`
	// Routers is each router's view of the backends at the end of a run
	// with telemetry.
	Routers []RouterEnd `json:",omitempty"`
	// Unfinished holds the measured turns still running at the end, when
	// Config.KeepRecords and Config.Cooldown are set.
	Unfinished []metrics.TurnRecord
	// Closed is set for a closed-loop run (Config.Clients).
	Closed *ClosedResult `json:",omitempty"`
}

// ClosedResult is what a closed-loop run adds, over its measured window.
type ClosedResult struct {
	Clients int `json:"clients"`
	// Admitted counts the attempts a gateway handed to its engine in the
	// window; GatewayQueue* is their time from arrival at the gateway to
	// that admission (zero for those admitted at once).
	Admitted          int     `json:"admitted"`
	GatewayQueueMeanS float64 `json:"gateway_queue_mean_s"`
	GatewayQueueP95S  float64 `json:"gateway_queue_p95_s"`
	// Steps and MeanStepS are the engine steps the fleet's workers took in
	// the window and their mean duration.
	Steps     int64   `json:"steps"`
	MeanStepS float64 `json:"mean_step_s"`
	// Of the turns that completed in the window: Late missed the TTFT SLO,
	// Preempted were preempted and recomputed in the engine at least once
	// on their successful attempt, and Degraded did either (or both).
	Late      int `json:"late"`
	Preempted int `json:"preempted"`
	Degraded  int `json:"degraded"`
}

// Dispatch is one attempt a router sent to a backend.
type Dispatch struct {
	At time.Duration `json:"at"`
	// Session is the session of the turn it belongs to, as its record
	// names it (metrics.TurnRecord.Session).
	Session uint64 `json:"session"`
	Router  int    `json:"router"`
	Backend int    `json:"backend"`
	Tokens  int    `json:"tokens"`
	// Model is the model its session asks for (none when no backend names
	// models).
	Model string `json:"model,omitempty"`
	// Misroute: the backend could not serve it when it was sent (killed,
	// hung, or the request exceeded its context limit).
	Misroute bool `json:"misroute"`
}

// SignalSample is one backend's telemetry report (its At is when the
// gateway assembled it).
type SignalSample struct {
	Backend int               `json:"backend"`
	Signals telemetry.Signals `json:"signals"`
}

// Mark is a notable instant: a fault starting or ending ("fault:kill",
// "end:kill") or a backend's first report without hardware signals after
// its exporter died ("fallback").
type Mark struct {
	At      time.Duration `json:"at"`
	Backend int           `json:"backend"`
	What    string        `json:"what"`
}

// RouterEnd is one router's view at the end of a run.
type RouterEnd struct {
	Backends []router.BackendStatus `json:"backends"`
	// Weights are the policy's weights, if it keeps any.
	Weights []policy.BackendWeight `json:"weights,omitempty"`
}

// OpenResult is what an open-loop run adds.
type OpenResult struct {
	// Sent is how many requests arrived (warm-up included).
	Sent int `json:"sent"`
	// EndS is when the run stopped: every measured turn had ended.
	EndS float64 `json:"end_s"`
}

// BackendResult is one backend's share of a run.
type BackendResult struct {
	Name    string `json:"name"`
	Region  string `json:"region"`
	Workers int    `json:"workers"`
	metrics.BackendSummary
	// BusyPct is the share of the run's worker time spent in steps.
	BusyPct float64 `json:"busy_pct"`
	// MeanBatch and MeanKVFillPct are time-weighted over busy time.
	MeanBatch     float64 `json:"mean_batch"`
	MeanKVFillPct float64 `json:"mean_kv_fill_pct"`
	Preemptions   int64   `json:"preemptions"`
	// Gateway counts over the whole run (warm-up included). Every request a
	// gateway received is completed, cancelled, rejected, or still active or
	// waiting at the end.
	GatewayReceived  uint64 `json:"gateway_received"`
	GatewayCompleted uint64 `json:"gateway_completed"`
	GatewayCancelled uint64 `json:"gateway_cancelled"`
	GatewayRejected  uint64 `json:"gateway_rejected"`
	GatewayActive    int    `json:"gateway_active"`
	GatewayWaiting   int    `json:"gateway_waiting"`
	// MaxInputTPS is the gateway's maximum input tokens/s at the end of the
	// run (the weight pulsar-waw-tps places by); PeakInputTPS the highest
	// input tokens/s it served.
	MaxInputTPS  float64 `json:"max_input_tps"`
	PeakInputTPS float64 `json:"peak_input_tps"`
}

// SetEngine fills the engine figures from the backend's workers' counters
// summed over span seconds, for KV budgets of kvTokens per worker.
func (r *BackendResult) SetEngine(t engine.Totals, span float64, kvTokens int) {
	r.BusyPct = pct(t.BusyTime.Seconds(), span*float64(r.Workers))
	r.Preemptions = t.Preemptions
	if busy := t.BusyTime.Seconds(); busy > 0 {
		r.MeanBatch = t.BatchSeconds / busy
		r.MeanKVFillPct = 100 * t.KVTokenSeconds / busy / float64(kvTokens)
	}
}

// snapshotWarm keeps every worker's totals at the end of the warm-up.
func (s *simulation) snapshotWarm() {
	s.warm = make([][]engine.Totals, len(s.backends))
	for b, bs := range s.backends {
		for w := range bs.cl.Len() {
			bs.cl.Worker(w).Sync(s.now)
			s.warm[b] = append(s.warm[b], bs.cl.Worker(w).Totals())
		}
	}
}

func (s *simulation) result() *Result {
	s.sessions.each(func(ss *session) {
		if !ss.turn.Done() {
			rec := ss.turn.Record
			rec.End = s.end
			s.coll.Unfinished(rec)
		}
	})
	res := &Result{Summary: s.coll.Summary(), Events: s.events}
	per := s.coll.PerBackend(len(s.backends))
	// Engine figures cover the span the arrival source names: the run, its
	// measured window (closed loop), or the measured part up to the end of
	// the drain (trace).
	from, to := s.src.window(s)
	span := (to - from).Seconds()
	var fleet engine.Totals
	for b, bs := range s.backends {
		var sum engine.Totals
		for w := range bs.cl.Len() {
			bs.cl.Worker(w).Sync(to) // count the finished steps of runs still going
			t := bs.cl.Worker(w).Totals()
			if s.warm != nil {
				t = t.Minus(s.warm[b][w])
			}
			sum = sum.Plus(t)
		}
		fleet = fleet.Plus(sum)
		st := bs.gw.TakeStats(s.end)
		var received uint64
		for _, n := range st.Received {
			received += n
		}
		br := BackendResult{
			Name: bs.spec.Name, Region: s.cfg.Regions[bs.spec.Region].Name, Workers: bs.spec.Workers,
			BackendSummary:  per[b],
			GatewayReceived: received, GatewayCompleted: st.Completed, GatewayCancelled: st.Cancelled,
			GatewayRejected: st.Rejected, GatewayActive: st.Active, GatewayWaiting: st.Waiting,
			MaxInputTPS: st.MaxInputTPS, PeakInputTPS: st.PeakInputTPS,
		}
		br.SetEngine(sum, span, bs.spec.Profile.KVTokens)
		res.Backends = append(res.Backends, br)
	}
	if s.cfg.KeepRecords {
		res.Records = s.coll.Records()
		res.Unfinished = s.coll.UnfinishedRecords()
	}
	s.src.report(s, res, fleet)
	res.Dispatches, res.Marks, res.Signals = s.dispatches, s.marks, s.samples
	if s.track {
		for _, rs := range s.routers {
			end := RouterEnd{Backends: rs.r.Backends(s.end)}
			if wr, ok := rs.r.Policy().(policy.WeightReporter); ok {
				end.Weights = wr.Weights(rs.r.Views(), nil)
			}
			res.Routers = append(res.Routers, end)
		}
	}
	return res
}

func pct(num, den float64) float64 {
	if den <= 0 {
		return 0
	}
	return 100 * num / den
}
