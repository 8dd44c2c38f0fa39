package engine

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrTooLong is returned by Submit for a request that can never fit in the
// worker's KV budget.
var ErrTooLong = errors.New("engine: request does not fit in the KV budget")

// Request is one generation request.
type Request struct {
	ID uint64
	// Session identifies the conversation; its cache entry is reused by the
	// session's next request. Zero means no session (never cached).
	Session      uint64
	PromptTokens int
	OutputTokens int
	// BlockHashes, when set, name the prompt's prefix blocks of BlockSize
	// tokens each (the last one possibly partial), one id per block, as public
	// traces give them: two prompts whose lists share their first k ids share
	// their first k blocks. Such a request uses the block cache, not its
	// session's entry.
	BlockHashes []uint64
	BlockSize   int
}

// blocks reports whether the request uses the block cache.
func (r *Request) blocks() bool { return len(r.BlockHashes) > 0 }

// blockTokens is the number of prompt tokens in block i.
func (r *Request) blockTokens(i int) int {
	return min(r.BlockSize, r.PromptTokens-i*r.BlockSize)
}

// EventKind says what happened to a request.
type EventKind uint8

// Event kinds.
const (
	// FirstToken: the request's first output token was produced.
	FirstToken EventKind = iota + 1
	// Finished: the request produced all its output tokens.
	Finished
)

// Event is something a Worker reports at the end of a step.
type Event struct {
	Kind    EventKind
	ID      uint64
	Session uint64
	At      time.Duration
	// PromptTokens, CachedTokens and OutputTokens are set on Finished.
	// CachedTokens counts prompt tokens served from the prefix cache at the
	// request's first admission.
	PromptTokens, CachedTokens, OutputTokens int
	// HostTokens, set on Finished, is the part of CachedTokens loaded from
	// the host tier (see host.go) rather than found in GPU memory.
	HostTokens int
	// Preemptions, set on Finished, counts how often the request was
	// preempted and recomputed on its way.
	Preemptions int
}

// Options tune a Worker without changing its model.
type Options struct {
	// MaxStepsPerRun caps how many identical decode steps are planned as one
	// run; 0 means no cap, 1 means step by step.
	MaxStepsPerRun int
}

// RunInfo describes the worker's current (or last) run of identical steps.
type RunInfo struct {
	Start         time.Duration
	StepDuration  time.Duration
	Steps         int
	Batch         int // running sequences
	Decoding      int // sequences decoding one token per step
	PrefillTokens int // prefill tokens per step (zero in a run of more than one step)
	KVUsed        int // tokens held by running sequences at the start
	CacheTokens   int // tokens held by the prefix cache at the start
}

// Totals are counters over the worker's life.
type Totals struct {
	Steps    int64
	BusyTime time.Duration
	// BatchSeconds and KVTokenSeconds integrate the running batch size and the
	// KV tokens in use over busy time, for time-weighted means.
	BatchSeconds   float64
	KVTokenSeconds float64
	PrefillTokens  int64
	DecodeTokens   int64
	Preemptions    int64
	CacheHits      int64 // admissions that reused a cache entry
	CachedTokens   int64 // prompt tokens served from the cache
	HostHits       int64 // admissions that loaded cached tokens from the host tier
	HostTokens     int64 // of CachedTokens, those loaded from the host tier
	Finished       int64
	Cancelled      int64
}

// Plus is the counters of two workers (or spans) together.
func (t Totals) Plus(o Totals) Totals {
	return Totals{Steps: t.Steps + o.Steps, BusyTime: t.BusyTime + o.BusyTime,
		BatchSeconds: t.BatchSeconds + o.BatchSeconds, KVTokenSeconds: t.KVTokenSeconds + o.KVTokenSeconds,
		PrefillTokens: t.PrefillTokens + o.PrefillTokens, DecodeTokens: t.DecodeTokens + o.DecodeTokens,
		Preemptions: t.Preemptions + o.Preemptions, CacheHits: t.CacheHits + o.CacheHits,
		CachedTokens: t.CachedTokens + o.CachedTokens, HostHits: t.HostHits + o.HostHits, HostTokens: t.HostTokens + o.HostTokens,
		Finished: t.Finished + o.Finished, Cancelled: t.Cancelled + o.Cancelled}
}

// Minus is what the counters gained since t0, an earlier reading.
func (t Totals) Minus(t0 Totals) Totals {
	return Totals{Steps: t.Steps - t0.Steps, BusyTime: t.BusyTime - t0.BusyTime,
		BatchSeconds: t.BatchSeconds - t0.BatchSeconds, KVTokenSeconds: t.KVTokenSeconds - t0.KVTokenSeconds,
		PrefillTokens: t.PrefillTokens - t0.PrefillTokens, DecodeTokens: t.DecodeTokens - t0.DecodeTokens,
		Preemptions: t.Preemptions - t0.Preemptions, CacheHits: t.CacheHits - t0.CacheHits,
		CachedTokens: t.CachedTokens - t0.CachedTokens, HostHits: t.HostHits - t0.HostHits, HostTokens: t.HostTokens - t0.HostTokens,
		Finished: t.Finished - t0.Finished, Cancelled: t.Cancelled - t0.Cancelled}
}

// seq is a sequence's hot state: what every step reads and writes for each
// running sequence, and what Cancel and Progress look up. The worker keeps
// its sequences by value, in running and waiting order, so a step streams
// one contiguous array of 64-byte entries (one cache line each) instead of
// chasing a pointer per sequence: with thousands of workers stepped in turn,
// a worker's sequences are rarely in cache when its step comes. The entry
// holds no pointer, so the collector does not scan the arrays either. What
// only admission, preemption and the end of a sequence read is in its
// seqCold, in the worker's cold slab.
type seq struct {
	id          uint64 // the request's ID
	target      int    // tokens that must be in KV before decoding: prompt (+ generated after a preemption)
	computed    int    // tokens of target in KV
	generated   int
	kv          int // KV tokens reserved: target + tokens generated since
	planPrefill int // prefill tokens planned in the current step
	output      int // the request's OutputTokens
	cold        int32
	cancelled   bool
}

func (s *seq) decoding() bool { return s.computed >= s.target }

// seqCold is the part of a sequence a step does not read. It stays in one
// slot of Worker.cold from Submit until the sequence leaves the worker; the
// slot is then cleared and reused. Only Submit grows the slab, so a pointer
// into it is never kept across a Submit.
type seqCold struct {
	req         Request
	cached      int           // prompt tokens from cache at the first admission
	host        int           // of cached, those loaded from the host tier
	preemptions int           // times preempted (recomputed)
	pinned      []*cacheEntry // cached prefix blocks this sequence holds
	admitted    bool
}

// cacheEntry is a finished session's KV (keyed by session) or one prompt
// block (keyed by its hash id). A block that running sequences hold (refs >
// 0) is pinned: it is out of the LRU list and its tokens count in kvUsed.
type cacheEntry struct {
	key        uint64
	tokens     int
	block      bool
	refs       int
	onHost     bool   // in the host tier (host.go), not in GPU memory
	mark       uint64 // matchBlocks' pass that last met this entry
	prev, next *cacheEntry
}

// Worker is one GPU worker. The zero value is not usable; call NewWorker.
//
// The fields a step reads come first (the run, KV use, the sequences, the
// profile's step constants, then the counters), so that a step touches few
// cache lines of the worker; the caches' maps and lists follow.
type Worker struct {
	busy bool
	run  RunInfo

	kvUsed      int
	cacheTokens int // tokens of the entries in the LRU list
	running     []seq
	waiting     seqQueue
	slow        float64 // step cost multiplier; 0 means 1
	prof        Profile
	opts        Options

	totals Totals

	cold     []seqCold // by seq.cold
	freeCold []int32   // free slots of cold

	cache  map[uint64]*cacheEntry // by session
	blocks map[uint64]*cacheEntry // by block hash id
	lru    cacheEntry             // sentinel: lru.next is most recent, lru.prev least
	pass   uint64
	host   *hostTier // nil without a host tier
}

// NewWorker returns an idle worker. The profile must be valid.
func NewWorker(p Profile, opts Options) (*Worker, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if opts.MaxStepsPerRun < 0 {
		return nil, fmt.Errorf("engine: MaxStepsPerRun must be >= 0, got %d", opts.MaxStepsPerRun)
	}
	w := &Worker{prof: p, opts: opts, cache: make(map[uint64]*cacheEntry), blocks: make(map[uint64]*cacheEntry)}
	w.lru.next, w.lru.prev = &w.lru, &w.lru
	if p.HostTier() {
		w.host = newHostTier()
	}
	return w, nil
}

// Profile returns the worker's cost model.
func (w *Worker) Profile() Profile { return w.prof }

// Running is the number of admitted sequences.
func (w *Worker) Running() int { return len(w.running) }

// Waiting is the number of sequences waiting for admission.
func (w *Worker) Waiting() int { return w.waiting.len() }

// Load is Running plus Waiting.
func (w *Worker) Load() int { return len(w.running) + w.waiting.len() }

// SeqLimit is the profile's sequence limit (MaxSeqs).
func (w *Worker) SeqLimit() int { return w.prof.MaxSeqs }

// CachedPromptAt is how many of r's prompt tokens this worker holds cached at
// now: its prefix blocks when r carries block hashes, else its session's
// entry.
func (w *Worker) CachedPromptAt(now time.Duration, r *Request) int {
	if len(r.BlockHashes) > 0 {
		return w.CachedPrefixAt(now, r)
	}
	return w.CachedTokensAt(now, r.Session)
}

// KVUsed is the number of KV tokens held by running sequences (with the
// cached blocks they hold).
func (w *Worker) KVUsed() int { return w.kvUsed }

// CacheTokens is the number of KV tokens held by the prefix cache and free
// to evict (blocks that running sequences hold count in KVUsed).
func (w *Worker) CacheTokens() int { return w.cacheTokens }

// CachedTokens is the size of the session's cache entry on this worker, in
// GPU memory or in the host tier.
func (w *Worker) CachedTokens(session uint64) int {
	if e, ok := w.cache[session]; ok {
		return e.tokens
	}
	if e := w.hostSession(session); e != nil {
		return e.tokens
	}
	return 0
}

// CachedPrefix is how many of r's prompt tokens this worker's block cache
// holds as a prefix (0 for a request without block hashes).
func (w *Worker) CachedPrefix(r *Request) int {
	_, tokens := w.matchBlocks(r, false)
	return tokens
}

// CachedPrefixAt is CachedPrefix as stepping one at a time would report it
// at now (see CachedTokensAt).
func (w *Worker) CachedPrefixAt(now time.Duration, r *Request) int {
	if w.KVUsedAt(now)+w.cacheTokens > w.prof.KVTokens {
		w.Sync(now)
	}
	return w.CachedPrefix(r)
}

// Progress reports how many output tokens request id has produced and
// whether the worker holds it (running or waiting). A live shell reads it
// after each step to stream tokens at the pace of the model.
func (w *Worker) Progress(id uint64) (generated int, ok bool) {
	for i := range w.running {
		if w.running[i].id == id {
			return w.running[i].generated, true
		}
	}
	for i := range w.waiting.len() {
		if s := w.waiting.at(i); s.id == id {
			return s.generated, true
		}
	}
	return 0, false
}

// Totals returns the worker's life counters.
func (w *Worker) Totals() Totals { return w.totals }

// Run describes the run in progress (or the last one when idle).
func (w *Worker) Run() RunInfo { return w.run }

// Busy reports whether a run is in progress.
func (w *Worker) Busy() bool { return w.busy }

// NextEventAt is when the run in progress ends; ok is false when idle.
func (w *Worker) NextEventAt() (at time.Duration, ok bool) {
	if !w.busy {
		return 0, false
	}
	return w.run.Start + time.Duration(w.run.Steps)*w.run.StepDuration, true
}

// Submit queues a request at time now. If the worker is in a run of identical
// steps, the run is cut at the end of the step in progress so that the request
// can be admitted there.
func (w *Worker) Submit(now time.Duration, r Request) error {
	if r.PromptTokens <= 0 || r.OutputTokens <= 0 {
		return fmt.Errorf("engine: request %d needs prompt and output tokens > 0, got %d and %d", r.ID, r.PromptTokens, r.OutputTokens)
	}
	if r.OutputTokens > w.prof.KVTokens-r.PromptTokens { // no sum: it could overflow
		return fmt.Errorf("%w: %d prompt + %d output tokens > %d", ErrTooLong, r.PromptTokens, r.OutputTokens, w.prof.KVTokens)
	}
	if r.blocks() {
		if r.BlockSize < 1 {
			return fmt.Errorf("engine: request %d has block hashes but block size %d", r.ID, r.BlockSize)
		}
		if want := (r.PromptTokens-1)/r.BlockSize + 1; len(r.BlockHashes) != want {
			return fmt.Errorf("engine: request %d has %d block hashes for %d prompt tokens in blocks of %d, want %d",
				r.ID, len(r.BlockHashes), r.PromptTokens, r.BlockSize, want)
		}
	}
	if len(w.freeCold) == 0 && len(w.cold) >= math.MaxInt32 {
		return fmt.Errorf("engine: request %d: the worker already holds %d sequences; drain it first", r.ID, len(w.cold))
	}
	w.waiting.pushBack(seq{id: r.ID, target: r.PromptTokens, output: r.OutputTokens, cold: w.newCold(r)})
	if w.busy {
		w.cutRun(now)
	} else {
		w.plan(now)
	}
	return nil
}

// SetSlowdown multiplies the cost of every step from the end of the step in
// progress at now (a thermal fault: the clock throttles and steps take
// longer). factor must be >= 1 and finite; 1 restores the profile's cost.
func (w *Worker) SetSlowdown(now time.Duration, factor float64) error {
	if !(factor >= 1) || math.IsInf(factor, 0) {
		return fmt.Errorf("engine: slowdown must be a finite number >= 1, got %v", factor)
	}
	if factor == w.slow || (factor == 1 && w.slow == 0) {
		return nil
	}
	w.slow = factor
	w.cutRun(now)
	return nil
}

// Slowdown is the current step cost multiplier.
func (w *Worker) Slowdown() float64 { return max(w.slow, 1) }

// Cancel drops a request. A waiting request leaves at once; a running one at
// the end of the step in progress, without a cache entry. It reports whether
// the request was found.
func (w *Worker) Cancel(now time.Duration, id uint64) bool {
	for i := range w.waiting.len() {
		if s := w.waiting.at(i); s.id == id {
			w.dropCold(s.cold)
			w.waiting.remove(i)
			w.totals.Cancelled++
			// The head of the queue may have been what blocked admission.
			w.cutRun(now)
			return true
		}
	}
	for i := range w.running {
		if s := &w.running[i]; s.id == id && !s.cancelled {
			s.cancelled = true
			w.cutRun(now)
			return true
		}
	}
	return false
}

// Sync applies the steps of the current run that have ended by now, so that
// what the worker reports (KV in use, cache entries, totals) is what stepping
// one at a time would report at now. Steps inside a run change only token
// counts, so nothing is emitted; the rest of the run is left as it was.
func (w *Worker) Sync(now time.Duration) {
	m := w.stepsDone(now)
	if m <= 0 {
		return
	}
	w.account(m)
	for i := range w.running {
		w.running[i].generated += m
		w.running[i].kv += m
	}
	w.kvUsed += m * len(w.running)
	w.totals.DecodeTokens += int64(m * len(w.running))
	w.evict()
	w.run.Start += time.Duration(m) * w.run.StepDuration
	w.run.Steps -= m
	w.run.KVUsed, w.run.CacheTokens = w.kvUsed, w.cacheTokens
}

// stepsDone is how many steps of a run of several have ended by now (never
// the last one: its end is an event of its own).
func (w *Worker) stepsDone(now time.Duration) int {
	if !w.busy || w.run.Steps <= 1 || now <= w.run.Start {
		return 0
	}
	return min(int((now-w.run.Start)/w.run.StepDuration), w.run.Steps-1)
}

// KVUsedAt is KVUsed as stepping one at a time would report it at now. It
// changes nothing.
func (w *Worker) KVUsedAt(now time.Duration) int {
	return w.kvUsed + w.stepsDone(now)*w.run.Decoding
}

// CachedTokensAt is CachedTokens as stepping one at a time would report it at
// now: if the KV growth since the run began has pushed entries out of the
// cache, the worker first applies the finished steps (see Sync).
func (w *Worker) CachedTokensAt(now time.Duration, session uint64) int {
	if w.KVUsedAt(now)+w.cacheTokens > w.prof.KVTokens {
		w.Sync(now)
	}
	return w.CachedTokens(session)
}

// account adds k steps of the current run to the totals.
func (w *Worker) account(k int) {
	busy := time.Duration(k) * w.run.StepDuration
	w.totals.Steps += int64(k)
	w.totals.BusyTime += busy
	w.totals.BatchSeconds += float64(w.run.Batch) * busy.Seconds()
	// KV grows by one token per decoding sequence per step: use the run's mean.
	w.totals.KVTokenSeconds += (float64(w.run.KVUsed) + float64(w.run.Decoding*(k-1))/2) * busy.Seconds()
}

// cutRun ends the current run after the step in progress at now.
func (w *Worker) cutRun(now time.Duration) {
	if !w.busy || w.run.Steps <= 1 || now < w.run.Start {
		return
	}
	m := int((now-w.run.Start)/w.run.StepDuration) + 1
	if m < w.run.Steps {
		w.run.Steps = m
	}
}

// Advance completes the run that ends at or before now, appends what happened
// to out, plans the next run and returns out. It does nothing if the run ends
// after now.
func (w *Worker) Advance(now time.Duration, out []Event) []Event {
	end, ok := w.NextEventAt()
	if !ok || end > now {
		return out
	}
	k := w.run.Steps
	if k > 1 {
		// Stepping one at a time would have evicted cache entries for the KV
		// growth of the first k-1 steps before anything finished in step k.
		grow := (k - 1) * w.run.Decoding
		w.kvUsed += grow
		w.evict()
		w.kvUsed -= grow
	}
	w.account(k)
	// One pass over the running sequences, compacting in place: s points
	// into w.running, which nothing in the loop grows or moves.
	run, kept := w.running, 0
	for i := range run {
		s := &run[i]
		if s.planPrefill > 0 {
			s.computed += s.planPrefill
			w.totals.PrefillTokens += int64(s.planPrefill)
			s.planPrefill = 0
			if s.computed >= s.target {
				s.generated++
				s.kv++
				w.kvUsed++
				if s.generated == 1 && !s.cancelled {
					out = append(out, Event{Kind: FirstToken, ID: s.id, Session: w.cold[s.cold].req.Session, At: end})
				}
			}
		} else if s.decoding() {
			s.generated += k
			s.kv += k
			w.kvUsed += k
			w.totals.DecodeTokens += int64(k)
		}
		switch {
		case s.cancelled:
			w.release(s)
			w.dropCold(s.cold)
			w.totals.Cancelled++
		case s.generated >= s.output:
			w.totals.Finished++
			c := &w.cold[s.cold]
			out = append(out, Event{Kind: Finished, ID: s.id, Session: c.req.Session, At: end,
				PromptTokens: c.req.PromptTokens, CachedTokens: c.cached, HostTokens: c.host, OutputTokens: s.generated, Preemptions: c.preemptions})
			w.finish(s)
			w.dropCold(s.cold)
		default:
			if kept != i {
				run[kept] = *s
			}
			kept++
		}
	}
	w.running = run[:kept]
	w.evict()
	w.plan(end)
	return out
}

// plan composes the next run starting at time at.
func (w *Worker) plan(at time.Duration) {
	w.busy = false
	// 1. Room for one new token per running sequence.
	for len(w.running) > 0 && w.prof.KVTokens-w.kvUsed < len(w.running) {
		w.preemptLast()
	}
	if len(w.running) == 0 && w.waiting.len() == 0 {
		w.run = RunInfo{Start: at}
		return
	}
	// 2-3. Decode tokens, then prefill of admitted sequences. One pass
	// counts the decoding sequences, finds the first one still prefilling
	// and the fewest output tokens any has left (the run's length, used only
	// when nothing prefills: then nothing is admitted either, as an admitted
	// sequence always prefills, and the running set is this one).
	budget := w.prof.chunk()
	decoding, prefill := 0, 0
	left, prefilling := int(^uint(0)>>1), len(w.running)
	for i := range w.running {
		s := &w.running[i]
		if s.decoding() {
			decoding++
		} else if prefilling == len(w.running) {
			prefilling = i
		}
		left = min(left, s.output-s.generated)
	}
	budget -= decoding
	for i := prefilling; i < len(w.running); i++ {
		if s := &w.running[i]; !s.decoding() && budget > 0 {
			s.planPrefill = min(s.target-s.computed, budget)
			budget -= s.planPrefill
			prefill += s.planPrefill
		}
	}
	// 4. Admission, first come first served.
	load := 0 // tokens loaded from the host tier in this step
	for budget > 0 && len(w.running) < w.prof.MaxSeqs && w.waiting.len() > 0 {
		s := *w.waiting.at(0) // a copy, appended to running below
		c := &w.cold[s.cold]
		var match []*cacheEntry
		need, matched := s.target, 0
		if c.req.blocks() {
			// Blocks the sequence shares are held once; a block now in the
			// LRU list moves into KVUsed.
			match, matched = w.matchBlocks(&c.req, true)
			need -= matched
			for _, e := range match {
				if e.refs == 0 {
					need += e.tokens
				}
			}
		}
		if w.kvUsed+need+len(w.running)+1 > w.prof.KVTokens {
			break
		}
		w.waiting.popFront()
		s.computed = 0
		s.kv = s.target
		fromHost := 0
		if c.req.blocks() {
			if matched > 0 {
				s.computed = min(matched, s.target-1)
				if w.host != nil {
					fromHost = hostShare(&c.req, match, matched, s.computed)
				}
			}
			for _, e := range match {
				load += w.pin(e)
			}
			c.pinned = match
			s.kv = s.target - matched
			if matched > 0 {
				w.totals.CacheHits++
				w.totals.CachedTokens += int64(s.computed)
			}
		} else if e, ok := w.cache[c.req.Session]; ok {
			s.computed = min(e.tokens, s.target-1)
			w.dropCache(e)
			w.totals.CacheHits++
			w.totals.CachedTokens += int64(s.computed)
		} else if e := w.hostSession(c.req.Session); e != nil {
			s.computed = min(e.tokens, s.target-1)
			fromHost = s.computed
			load += e.tokens
			w.hostDrop(e)
			w.totals.CacheHits++
			w.totals.CachedTokens += int64(s.computed)
		}
		if fromHost > 0 {
			w.totals.HostHits++
			w.totals.HostTokens += int64(fromHost)
		}
		if !c.admitted {
			c.admitted = true
			c.cached = s.computed
			c.host = fromHost
		}
		w.kvUsed += s.kv
		s.planPrefill = min(s.target-s.computed, budget)
		budget -= s.planPrefill
		prefill += s.planPrefill
		w.running = append(w.running, s)
	}
	w.evict()
	if len(w.running) == 0 {
		// Only possible if the head cannot fit, which Submit rules out.
		w.run = RunInfo{Start: at}
		return
	}
	steps := 1
	if prefill == 0 {
		steps = min(left, (w.prof.KVTokens-w.kvUsed)/len(w.running))
		if w.opts.MaxStepsPerRun > 0 {
			steps = min(steps, w.opts.MaxStepsPerRun)
		}
		steps = max(steps, 1)
	}
	w.busy = true
	step := w.prof.StepDuration(decoding, prefill)
	if w.slow > 0 && w.slow != 1 {
		step = time.Duration(float64(step)*w.slow + 0.5)
	}
	step += w.prof.HostLoadDuration(load)
	w.run = RunInfo{Start: at, StepDuration: step, Steps: steps,
		Batch: len(w.running), Decoding: decoding, PrefillTokens: prefill, KVUsed: w.kvUsed, CacheTokens: w.cacheTokens}
}

// preemptLast returns the most recently admitted sequence to the head of the
// waiting queue; it will recompute its prompt and generated tokens.
func (w *Worker) preemptLast() {
	last := len(w.running) - 1
	s := w.running[last] // a copy: w.running shrinks
	w.running = w.running[:last]
	w.release(&s)
	c := &w.cold[s.cold]
	s.computed, s.planPrefill = 0, 0
	s.target = c.req.PromptTokens + s.generated
	c.preemptions++
	w.totals.Preemptions++
	if s.cancelled {
		w.totals.Cancelled++
		w.dropCold(s.cold)
		return
	}
	w.waiting.pushFront(s)
}

// newCold puts r in a free slot of the cold slab and returns the slot.
// Submit checks that the slab has room for one more.
func (w *Worker) newCold(r Request) int32 {
	if n := len(w.freeCold); n > 0 {
		i := w.freeCold[n-1]
		w.freeCold = w.freeCold[:n-1]
		w.cold[i] = seqCold{req: r}
		return i
	}
	w.cold = append(w.cold, seqCold{req: r})
	return int32(len(w.cold) - 1) //nolint:gosec // Submit keeps the slab under MaxInt32
}

// dropCold frees a sequence's slot, clearing it so that the request's block
// hashes and the pinned list are not kept alive.
func (w *Worker) dropCold(i int32) {
	w.cold[i] = seqCold{}
	w.freeCold = append(w.freeCold, i)
}

func (w *Worker) putCache(session uint64, tokens int) {
	if session == 0 {
		return
	}
	if e, ok := w.cache[session]; ok {
		w.dropCache(e)
	}
	w.hostForget(session, false)
	e := &cacheEntry{key: session, tokens: tokens}
	w.cache[session] = e
	w.pushFront(e)
}

// pushFront puts e in the LRU list as the most recent entry.
func (w *Worker) pushFront(e *cacheEntry) {
	e.prev, e.next = &w.lru, w.lru.next
	e.next.prev = e
	w.lru.next = e
	w.cacheTokens += e.tokens
}

// unlink takes e out of the LRU list.
func (w *Worker) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	w.cacheTokens -= e.tokens
}

func (w *Worker) dropCache(e *cacheEntry) {
	w.unlink(e)
	if e.block {
		delete(w.blocks, e.key)
	} else {
		delete(w.cache, e.key)
	}
}

// matchBlocks returns the cached blocks that start r's prompt and the prompt
// tokens they hold. It stops at the first block not cached, at a cached block
// shorter than r's (a partial block matches only its own tokens) and at an id
// met before in the same prompt. With pin set the blocks are returned for
// pinning; otherwise nothing is allocated.
func (w *Worker) matchBlocks(r *Request, pin bool) (match []*cacheEntry, tokens int) {
	w.pass++
	for i, h := range r.BlockHashes {
		e, ok := w.blocks[h]
		if !ok {
			if e = w.hostBlock(h); e == nil {
				break
			}
		}
		if e.mark == w.pass {
			break
		}
		e.mark = w.pass
		if pin {
			match = append(match, e)
		}
		want := r.blockTokens(i)
		tokens += min(e.tokens, want)
		if e.tokens < want {
			break
		}
	}
	return match, tokens
}

// pin adds a running sequence's hold on block e; a block in the host tier
// moves into GPU memory, and pin returns the tokens so loaded.
func (w *Worker) pin(e *cacheEntry) (loaded int) {
	if e.onHost {
		return w.promote(e)
	}
	if e.refs == 0 {
		w.unlink(e)
		w.kvUsed += e.tokens
	}
	e.refs++
	return 0
}

// unpin drops a hold; the last one returns the block to the LRU list as its
// most recent entry.
func (w *Worker) unpin(e *cacheEntry) {
	e.refs--
	if e.refs == 0 {
		w.kvUsed -= e.tokens
		w.pushFront(e)
	}
}

// release frees what a sequence holds: its own KV and its pinned blocks.
func (w *Worker) release(s *seq) {
	w.kvUsed -= s.kv
	s.kv = 0
	c := &w.cold[s.cold]
	for i := len(c.pinned) - 1; i >= 0; i-- {
		w.unpin(c.pinned[i])
	}
	c.pinned = nil
}

// finish caches what a finished sequence leaves: its session's whole KV, or
// its prompt blocks. Blocks go in from the last to the first, so the first
// block is the most recent and the chain is evicted from its tail, as vLLM
// frees a sequence's blocks.
func (w *Worker) finish(s *seq) {
	c := &w.cold[s.cold]
	if !c.req.blocks() {
		w.kvUsed -= s.kv
		w.putCache(c.req.Session, s.kv)
		return
	}
	w.kvUsed -= s.kv
	s.kv = 0
	for i := len(c.req.BlockHashes) - 1; i >= 0; i-- {
		if i < len(c.pinned) {
			w.unpin(c.pinned[i])
			continue
		}
		h := c.req.BlockHashes[i]
		if e, ok := w.blocks[h]; ok {
			if e.refs == 0 { // cached meanwhile by another sequence: touch it
				w.unlink(e)
				w.pushFront(e)
			}
			continue
		}
		w.hostForget(h, true)
		e := &cacheEntry{key: h, tokens: c.req.blockTokens(i), block: true}
		w.blocks[h] = e
		w.pushFront(e)
	}
	c.pinned = nil
}

// evict drops least recently used cache entries until everything fits.
func (w *Worker) evict() {
	for w.kvUsed+w.cacheTokens > w.prof.KVTokens && w.lru.prev != &w.lru {
		w.demote(w.lru.prev)
	}
}
