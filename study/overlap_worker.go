package study

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/report"
)

// The bounded worker overlap note's worker, as a workload of the overlap
// study of its own: a small deterministic discrete-event model (seeded,
// virtual time), not the LLM engine the rest of the study runs.
//
// Closed-loop clients send a submission as soon as their previous one ends
// (after a client round trip). The entrypoint queues it until one of the
// Workers physical workers has a free slot (max_inflight_per_worker); the
// submission keeps its slot until it ends. Inside the worker, L1/L2 is serial
// (one submission at a time); a share of the submissions then need the final
// L3, which runs in the worker's separate L3 worker, also serial, and sends
// one chunk to the GPU. The GPU stage is one model instance with a dynamic
// batcher: a batch of at most 16 chunks, launched when 16 wait or when the
// oldest waiting chunk has waited 5 ms, whichever comes first.

// WorkerParams are the worker model's parameters. DefaultWorkerParams
// derives each from the bounded worker overlap note's tables.
type WorkerParams struct {
	// Workers is the number of physical workers.
	Workers int
	// Handoff is the time a submission holds its slot before it reaches L2
	// (the entrypoint's hand-off to the worker).
	Handoff time.Duration
	// L2 is the mean L1/L2 service time (exponential).
	L2 time.Duration
	// L3Share is the share of submissions that need L3 and a GPU chunk.
	L3Share float64
	// L3Local is the mean L3 time outside the GPU (exponential).
	L3Local time.Duration
	// GPUBase and GPUPerChunk give a batch's compute time: base + per chunk.
	GPUBase, GPUPerChunk time.Duration
	// MaxBatch and BatchDelay are the dynamic batcher's batch size and
	// longest collection delay.
	MaxBatch   int
	BatchDelay time.Duration
	// ClientRTT is the mean of the client's own time per submission outside
	// the entrypoint (network and HTTP; exponential).
	ClientRTT time.Duration
}

// DefaultWorkerParams are the bounded worker overlap note's figures:
//   - L2: 1.24 ms, its "where the time goes" mean at 288 clients;
//   - L3Share: 0.308, its GPU chunks/s over requests/s, the same (0.308-0.309)
//     at every client count it lists;
//   - L3Local: 3.7 ms, its L3 step less its Triton queue and GPU compute
//     means, 3.55-3.87 ms across its client counts;
//   - GPUBase 0.62 ms and GPUPerChunk 0.66 ms: the line through its GPU
//     compute means at mean batches of 6.27 (4.76 ms) and 13.73 (9.68 ms);
//     a full batch of 16 then takes 11.2 ms, 1,430 chunks/s, near the 1,500
//     chunks/s of its direct GPU test;
//   - MaxBatch 16 and BatchDelay 5 ms, its GPU configuration;
//   - ClientRTT: 8.8 ms, its 36-client row's mean latency (36 / 2,638 req/s)
//     less the worker time its table gives there (no entrypoint queue);
//   - Workers 22 and Handoff 0.5 ms: the note does not give them; with them
//     one slot saturates at about its one-slot fleet throughput (3,900
//     req/s), the one figure the model is fitted to.
func DefaultWorkerParams() WorkerParams {
	return WorkerParams{Workers: 22, Handoff: 500 * time.Microsecond, L2: 1240 * time.Microsecond,
		L3Share: 0.308, L3Local: 3700 * time.Microsecond,
		GPUBase: 620 * time.Microsecond, GPUPerChunk: 660 * time.Microsecond,
		MaxBatch: 16, BatchDelay: 5 * time.Millisecond, ClientRTT: 8800 * time.Microsecond}
}

// WorkerClients are the note's client counts compared at one and two slots.
var WorkerClients = []int{288, 432}

// WorkerSlots are the note's two settings of max_inflight_per_worker.
var WorkerSlots = []int{1, 2}

// WorkerRun is one run of the worker model: the note's columns.
type WorkerRun struct {
	Clients int     `json:"clients"`
	Slots   int     `json:"slots"`
	Seed    uint64  `json:"seed"`
	RPS     float64 `json:"requests_per_s"`
	P50Ms   float64 `json:"p50_ms"`
	P95Ms   float64 `json:"p95_ms"`
	// L2Ms is the mean L1/L2 step (its wait for the worker and service);
	// L3Ms the mean L3 step of the submissions that needed L3 (wait for
	// the L3 worker, local time, GPU queue and compute); QueueMs the mean
	// entrypoint queue; GPUQueueMs and GPUComputeMs the chunks' mean wait in
	// the batcher and compute.
	L2Ms         float64 `json:"l2_ms"`
	L3Ms         float64 `json:"l3_ms"`
	QueueMs      float64 `json:"entrypoint_queue_ms"`
	GPUQueueMs   float64 `json:"gpu_queue_ms"`
	GPUComputeMs float64 `json:"gpu_compute_ms"`
	MeanBatch    float64 `json:"mean_gpu_batch"`
	ChunksPerS   float64 `json:"gpu_chunks_per_s"`
	GPUBusyPct   float64 `json:"gpu_busy_pct"`
}

// ErrBadWorkerRun marks a worker model run that cannot be made.
var ErrBadWorkerRun = errors.New("bad worker model run")

// Validate reports what is wrong with the parameters.
func (p WorkerParams) Validate() error {
	var errs []error
	if p.Workers < 1 {
		errs = append(errs, fmt.Errorf("workers must be >= 1, got %d", p.Workers))
	}
	if p.MaxBatch < 1 {
		errs = append(errs, fmt.Errorf("max batch must be >= 1, got %d", p.MaxBatch))
	}
	if !(p.L3Share >= 0 && p.L3Share <= 1) {
		errs = append(errs, fmt.Errorf("L3 share must be in [0, 1], got %v", p.L3Share))
	}
	if p.Handoff < 0 || p.L2 <= 0 || p.L3Local < 0 || p.GPUBase < 0 || p.GPUPerChunk < 0 || p.BatchDelay < 0 || p.ClientRTT < 0 {
		errs = append(errs, fmt.Errorf("times must be >= 0 (L2 > 0), got handoff %v, L2 %v, L3 %v, GPU %v + %v/chunk, delay %v, client %v",
			p.Handoff, p.L2, p.L3Local, p.GPUBase, p.GPUPerChunk, p.BatchDelay, p.ClientRTT))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrBadWorkerRun, errors.Join(errs...))
	}
	return nil
}

type wEventKind uint8

const (
	wArrive     wEventKind = iota // a client's submission reaches the entrypoint
	wHandedOff                    // joins its worker's L2 queue
	wL2Done                       // L2 ends on worker a
	wL3Local                      // L3's local part ends: the chunk goes to the GPU
	wBatchTimer                   // the batcher's collection delay runs out
	wBatchDone                    // the GPU finishes its batch
)

type wEvent struct {
	at   time.Duration
	seq  uint64 // ties in order of scheduling: deterministic
	kind wEventKind
	a    int // worker or submission, by kind
}

type wQueue []wEvent

func (q wQueue) Len() int { return len(q) }
func (q wQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q wQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *wQueue) Push(x any)   { *q = append(*q, x.(wEvent)) }
func (q *wQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// submission is one client's request in flight; clients reuse theirs.
type submission struct {
	queued, l2In, l3In, gpuIn time.Duration
	worker                    int
	needL3                    bool
}

type physWorker struct {
	inflight int
	l2Busy   bool
	l2Queue  []int // submissions
	l3Busy   bool
	l3Queue  []int
}

type workerSim struct {
	p      WorkerParams
	slots  int
	rng    *rand.Rand
	q      wQueue
	seq    uint64
	now    time.Duration
	from   time.Duration // start of the measured window
	subs   []submission
	ws     []physWorker
	entry  []int // submissions waiting for a slot, FIFO
	gpuQ   []int // submissions whose chunk waits for the GPU
	gpuOn  bool  // a batch is running
	timer  bool  // a collection timer is set
	batch  []int // the running batch
	batchT time.Duration

	// measured
	lat                              []float64
	done                             int
	l2Sum, l3Sum, qSum, gqSum, gcSum time.Duration
	l2N, l3N, qN, gqN, gcN           int
	batches, chunks                  int
	busy                             time.Duration
}

func (s *workerSim) push(at time.Duration, k wEventKind, a int) {
	s.seq++
	heap.Push(&s.q, wEvent{at: at, seq: s.seq, kind: k, a: a})
}

func (s *workerSim) exp(mean time.Duration) time.Duration {
	return time.Duration(s.rng.ExpFloat64() * float64(mean))
}

func (s *workerSim) measured() bool { return s.now >= s.from }

// RunWorker runs the worker model with clients closed-loop clients and
// slots submissions per worker for warmup and then measure of virtual
// time. The same arguments give the same result.
func RunWorker(p WorkerParams, clients, slots int, seed uint64, warmup, measure time.Duration) (WorkerRun, error) {
	if err := p.Validate(); err != nil {
		return WorkerRun{}, err
	}
	if clients < 1 || slots < 1 || warmup < 0 || measure <= 0 {
		return WorkerRun{}, fmt.Errorf("%w: want clients >= 1, slots >= 1, warmup >= 0 and measure > 0, got %d, %d, %v and %v",
			ErrBadWorkerRun, clients, slots, warmup, measure)
	}
	s := &workerSim{p: p, slots: slots, rng: rand.New(rand.NewPCG(seed, 0x6f7665726c6170)), from: warmup,
		subs: make([]submission, clients), ws: make([]physWorker, p.Workers)}
	for c := range clients {
		s.push(s.exp(p.ClientRTT), wArrive, c)
	}
	end := warmup + measure
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(wEvent)
		if e.at >= end {
			break
		}
		s.now = e.at
		s.handle(e)
	}
	// A batch still running at the end counts its share of the window.
	if s.gpuOn {
		s.busy += end - max(s.batchT, warmup)
	}
	win := measure.Seconds()
	r := WorkerRun{Clients: clients, Slots: slots, Seed: seed, RPS: float64(s.done) / win,
		ChunksPerS: float64(s.chunks) / win, GPUBusyPct: 100 * s.busy.Seconds() / win}
	slices.Sort(s.lat)
	r.P50Ms, r.P95Ms = metrics.Percentile(s.lat, 0.5), metrics.Percentile(s.lat, 0.95)
	mean := func(sum time.Duration, n int) float64 {
		if n == 0 {
			return 0
		}
		return float64(sum) / float64(n) / float64(time.Millisecond)
	}
	r.L2Ms, r.L3Ms, r.QueueMs = mean(s.l2Sum, s.l2N), mean(s.l3Sum, s.l3N), mean(s.qSum, s.qN)
	r.GPUQueueMs, r.GPUComputeMs = mean(s.gqSum, s.gqN), mean(s.gcSum, s.gcN)
	if s.batches > 0 {
		r.MeanBatch = float64(s.chunks) / float64(s.batches)
	}
	return r, nil
}

func (s *workerSim) handle(e wEvent) {
	switch e.kind {
	case wArrive:
		sub := &s.subs[e.a]
		sub.queued = s.now
		s.entry = append(s.entry, e.a)
		s.admit()
	case wHandedOff:
		w := &s.ws[s.subs[e.a].worker]
		s.subs[e.a].l2In = s.now
		w.l2Queue = append(w.l2Queue, e.a)
		s.startL2(s.subs[e.a].worker)
	case wL2Done:
		w := &s.ws[e.a]
		c := w.l2Queue[0]
		w.l2Queue = w.l2Queue[1:]
		w.l2Busy = false
		if s.measured() {
			s.l2Sum += s.now - s.subs[c].l2In
			s.l2N++
		}
		if s.subs[c].needL3 {
			s.subs[c].l3In = s.now
			w.l3Queue = append(w.l3Queue, c)
			s.startL3(e.a)
		} else {
			s.finish(c)
		}
		s.startL2(e.a)
	case wL3Local:
		s.subs[e.a].gpuIn = s.now
		s.gpuQ = append(s.gpuQ, e.a)
		s.batcher()
	case wBatchTimer:
		s.timer = false
		s.batcher()
	case wBatchDone:
		s.gpuOn = false
		if s.measured() {
			s.busy += s.now - max(s.batchT, s.from)
		}
		for _, c := range s.batch {
			w := s.subs[c].worker
			ww := &s.ws[w]
			ww.l3Queue = ww.l3Queue[1:] // c is the head: the L3 worker is serial
			ww.l3Busy = false
			if s.measured() {
				s.l3Sum += s.now - s.subs[c].l3In
				s.l3N++
			}
			s.finish(c)
			s.startL3(w)
		}
		s.batch = s.batch[:0]
		s.batcher()
	}
}

// admit gives waiting submissions free slots, least-loaded worker first.
func (s *workerSim) admit() {
	for len(s.entry) > 0 {
		best := -1
		for w := range s.ws {
			if s.ws[w].inflight < s.slots && (best < 0 || s.ws[w].inflight < s.ws[best].inflight) {
				best = w
			}
		}
		if best < 0 {
			return
		}
		c := s.entry[0]
		s.entry = s.entry[1:]
		sub := &s.subs[c]
		if s.measured() {
			s.qSum += s.now - sub.queued
			s.qN++
		}
		s.ws[best].inflight++
		sub.worker = best
		sub.needL3 = s.rng.Float64() < s.p.L3Share
		s.push(s.now+s.p.Handoff, wHandedOff, c)
	}
}

func (s *workerSim) startL2(w int) {
	ww := &s.ws[w]
	if ww.l2Busy || len(ww.l2Queue) == 0 {
		return
	}
	ww.l2Busy = true
	s.push(s.now+s.exp(s.p.L2), wL2Done, w)
}

func (s *workerSim) startL3(w int) {
	ww := &s.ws[w]
	if ww.l3Busy || len(ww.l3Queue) == 0 {
		return
	}
	ww.l3Busy = true
	s.push(s.now+s.exp(s.p.L3Local), wL3Local, ww.l3Queue[0])
}

// batcher launches a batch when the GPU is free and either MaxBatch chunks
// wait or the oldest has waited BatchDelay; else it sets the timer.
func (s *workerSim) batcher() {
	if s.gpuOn || len(s.gpuQ) == 0 {
		return
	}
	due := s.subs[s.gpuQ[0]].gpuIn + s.p.BatchDelay
	if len(s.gpuQ) < s.p.MaxBatch && s.now < due {
		if !s.timer {
			s.timer = true
			s.push(due, wBatchTimer, 0)
		}
		return
	}
	n := min(len(s.gpuQ), s.p.MaxBatch)
	s.batch = append(s.batch[:0], s.gpuQ[:n]...)
	s.gpuQ = slices.Delete(s.gpuQ, 0, n)
	compute := s.p.GPUBase + time.Duration(n)*s.p.GPUPerChunk
	s.gpuOn, s.batchT = true, s.now
	if s.measured() {
		s.batches++
		s.chunks += n
		for _, c := range s.batch {
			s.gqSum += s.now - s.subs[c].gpuIn
			s.gcSum += compute
			s.gqN++
			s.gcN++
		}
	}
	s.push(s.now+compute, wBatchDone, 0)
}

// finish ends submission c: its slot frees, and its client, which hears the
// reply after its round trip, sends the next submission at once.
func (s *workerSim) finish(c int) {
	sub := &s.subs[c]
	rtt := s.exp(s.p.ClientRTT)
	if s.measured() {
		s.lat = append(s.lat, float64(s.now-sub.queued+rtt)/float64(time.Millisecond))
		s.done++
	}
	s.ws[sub.worker].inflight--
	s.push(s.now+rtt, wArrive, c)
	s.admit()
}

// WorkerCell is the mean over seeds of one (clients, slots) setting.
type WorkerCell struct {
	WorkerRun
	Seeds int `json:"seeds"`
}

// WorkerStudy runs the worker model at every client count and slot setting
// with seeds 1..seeds (warmup, then measure of virtual time each) and
// returns the cells, means over the seeds, in order of clients then slots.
func WorkerStudy(p WorkerParams, clients, slots []int, seeds int, warmup, measure time.Duration) ([]WorkerCell, error) {
	if seeds < 1 || len(clients) == 0 || len(slots) == 0 {
		return nil, fmt.Errorf("%w: want seeds >= 1 and some clients and slots, got %d, %v and %v", ErrBadWorkerRun, seeds, clients, slots)
	}
	var cells []WorkerCell
	for _, c := range clients {
		for _, sl := range slots {
			var sum WorkerRun
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				r, err := RunWorker(p, c, sl, seed, warmup, measure)
				if err != nil {
					return nil, err
				}
				sum.RPS += r.RPS
				sum.P50Ms += r.P50Ms
				sum.P95Ms += r.P95Ms
				sum.L2Ms += r.L2Ms
				sum.L3Ms += r.L3Ms
				sum.QueueMs += r.QueueMs
				sum.GPUQueueMs += r.GPUQueueMs
				sum.GPUComputeMs += r.GPUComputeMs
				sum.MeanBatch += r.MeanBatch
				sum.ChunksPerS += r.ChunksPerS
				sum.GPUBusyPct += r.GPUBusyPct
			}
			n := float64(seeds)
			m := WorkerRun{Clients: c, Slots: sl, RPS: sum.RPS / n, P50Ms: sum.P50Ms / n, P95Ms: sum.P95Ms / n,
				L2Ms: sum.L2Ms / n, L3Ms: sum.L3Ms / n, QueueMs: sum.QueueMs / n, GPUQueueMs: sum.GPUQueueMs / n,
				GPUComputeMs: sum.GPUComputeMs / n, MeanBatch: sum.MeanBatch / n, ChunksPerS: sum.ChunksPerS / n,
				GPUBusyPct: sum.GPUBusyPct / n}
			cells = append(cells, WorkerCell{WorkerRun: m, Seeds: seeds})
		}
	}
	return cells, nil
}

// WorkerTable is the worker study's cells in the note's columns.
func WorkerTable(cells []WorkerCell) report.Table {
	t := report.Table{Title: "bounded worker overlap note's worker (model; means over seeds)",
		Headers: []string{"clients", "slots", "req/s", "p50 ms", "p95 ms", "L2 ms", "L3 step ms", "entry queue ms",
			"GPU queue ms", "GPU compute ms", "mean batch", "chunks/s", "GPU busy %"}}
	for _, c := range cells {
		t.Rows = append(t.Rows, []string{strconv.Itoa(c.Clients), strconv.Itoa(c.Slots), f(c.RPS, 0), f(c.P50Ms, 2), f(c.P95Ms, 2),
			f(c.L2Ms, 2), f(c.L3Ms, 2), f(c.QueueMs, 2), f(c.GPUQueueMs, 2), f(c.GPUComputeMs, 2), f(c.MeanBatch, 2),
			f(c.ChunksPerS, 0), f(c.GPUBusyPct, 1)})
	}
	return t
}
