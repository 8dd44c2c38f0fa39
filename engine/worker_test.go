package engine

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

const ms = time.Millisecond

// drain advances w until it is idle and returns every event.
func drain(t *testing.T, w *Worker) []Event {
	t.Helper()
	var out []Event
	for i := 0; ; i++ {
		at, ok := w.NextEventAt()
		if !ok {
			return out
		}
		if i > 1_000_000 {
			t.Fatal("worker never went idle")
		}
		out = w.Advance(at, out)
	}
}

func newWorker(t *testing.T, p Profile, opts Options) *Worker {
	t.Helper()
	w, err := NewWorker(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestStepDuration(t *testing.T) {
	half, full := HalfProfile(), FullProfile()
	tests := []struct {
		name              string
		p                 Profile
		decoding, prefill int
		want              time.Duration
	}{
		{"half idle batch", half, 0, 0, 8 * ms},
		{"half one decoder", half, 1, 0, 8170 * time.Microsecond},
		{"half 25 decoders", half, 25, 0, 12250 * time.Microsecond},
		{"half full chunk", half, 0, 2048, 212800 * time.Microsecond},
		{"half mixed", half, 10, 1000, 109700 * time.Microsecond},
		{"full mixed", full, 10, 1000, 54850 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.StepDuration(tt.decoding, tt.prefill); got != tt.want {
				t.Errorf("StepDuration(%d, %d) = %v, want %v", tt.decoding, tt.prefill, got, tt.want)
			}
		})
	}
}

func TestSingleRequestTiming(t *testing.T) {
	tests := []struct {
		name               string
		prompt, output     int
		firstToken, finish time.Duration
	}{
		// One 1000-token prefill step (8 + 100 ms), then two decode steps of 8.17 ms.
		{"short prompt", 1000, 3, 108 * ms, 124340 * time.Microsecond},
		// Chunks of 2048, 2048 and 904 tokens: 212.8 + 212.8 + 98.4 ms.
		{"chunked prompt", 5000, 1, 524 * ms, 524 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorker(t, HalfProfile(), Options{})
			if err := w.Submit(0, Request{ID: 1, Session: 7, PromptTokens: tt.prompt, OutputTokens: tt.output}); err != nil {
				t.Fatal(err)
			}
			ev := drain(t, w)
			if len(ev) != 2 || ev[0].Kind != FirstToken || ev[1].Kind != Finished {
				t.Fatalf("events = %+v, want FirstToken then Finished", ev)
			}
			if ev[0].At != tt.firstToken || ev[1].At != tt.finish {
				t.Errorf("first token at %v, finish at %v; want %v and %v", ev[0].At, ev[1].At, tt.firstToken, tt.finish)
			}
			if got := w.CachedTokens(7); got != tt.prompt+tt.output {
				t.Errorf("cache entry = %d tokens, want prompt+output = %d", got, tt.prompt+tt.output)
			}
		})
	}
}

func TestPrefixCacheHit(t *testing.T) {
	w := newWorker(t, HalfProfile(), Options{})
	must(t, w.Submit(0, Request{ID: 1, Session: 9, PromptTokens: 1000, OutputTokens: 3}))
	drain(t, w)
	tests := []struct {
		name           string
		prompt         int
		cached         int
		firstTokenCost time.Duration
	}{
		// The entry holds 1003 tokens; 500 new tokens cost 8 + 50 ms.
		{"growing turn", 1503, 1003, 58 * ms},
	}
	for _, tt := range tests {
		start := 10 * time.Second
		must(t, w.Submit(start, Request{ID: 2, Session: 9, PromptTokens: tt.prompt, OutputTokens: 1}))
		ev := drain(t, w)
		if ev[0].At-start != tt.firstTokenCost {
			t.Errorf("%s: first token after %v, want %v", tt.name, ev[0].At-start, tt.firstTokenCost)
		}
		if ev[1].CachedTokens != tt.cached {
			t.Errorf("%s: cached = %d, want %d", tt.name, ev[1].CachedTokens, tt.cached)
		}
	}
	// A full hit still computes one token: 8 + 0.1 ms.
	start := 20 * time.Second
	must(t, w.Submit(start, Request{ID: 3, Session: 9, PromptTokens: 1504, OutputTokens: 1}))
	ev := drain(t, w)
	if ev[0].At-start != 8100*time.Microsecond || ev[1].CachedTokens != 1503 {
		t.Errorf("full hit: first token after %v with %d cached, want 8.1ms and 1503", ev[0].At-start, ev[1].CachedTokens)
	}
	if tot := w.Totals(); tot.CacheHits != 2 || tot.CachedTokens != 1003+1503 {
		t.Errorf("totals = %+v, want 2 hits and 2506 cached tokens", tot)
	}
}

func TestCacheEvictedBeforePreemption(t *testing.T) {
	p := HalfProfile()
	p.KVTokens, p.MaxSeqs = 3000, 4
	w := newWorker(t, p, Options{})
	must(t, w.Submit(0, Request{ID: 1, Session: 1, PromptTokens: 999, OutputTokens: 1}))
	drain(t, w)
	must(t, w.Submit(time.Second, Request{ID: 2, Session: 2, PromptTokens: 999, OutputTokens: 1}))
	drain(t, w)
	if w.CacheTokens() != 2000 {
		t.Fatalf("cache = %d tokens, want 2000", w.CacheTokens())
	}
	// 1500 running tokens + 2000 cached > 3000: the least recent entry goes.
	must(t, w.Submit(2*time.Second, Request{ID: 3, Session: 3, PromptTokens: 1500, OutputTokens: 1}))
	if w.CachedTokens(1) != 0 || w.CachedTokens(2) != 1000 {
		t.Errorf("after admission cache = {1: %d, 2: %d}, want {1: 0, 2: 1000}", w.CachedTokens(1), w.CachedTokens(2))
	}
	drain(t, w)
	if w.Totals().Preemptions != 0 {
		t.Errorf("preemptions = %d, want 0: the cache must be evicted first", w.Totals().Preemptions)
	}
}

func TestPreemptionRecompute(t *testing.T) {
	p := HalfProfile()
	p.KVTokens, p.MaxSeqs = 1000, 2
	w := newWorker(t, p, Options{})
	must(t, w.Submit(0, Request{ID: 1, Session: 1, PromptTokens: 400, OutputTokens: 300}))
	must(t, w.Submit(0, Request{ID: 2, Session: 2, PromptTokens: 400, OutputTokens: 300}))
	ev := drain(t, w)
	// Request 1 prefills alone (48 ms: request 2 arrives as that step starts);
	// request 2 prefills next to one decoder (8 + 0.17 + 40 = 48.17 ms); 98
	// decode steps of two (8.34 ms) fill KV to 999 tokens; the newer sequence is
	// preempted with 99 tokens generated; the older finishes in 200 steps of
	// 8.17 ms; the newer recomputes 499 tokens (57.9 ms), which also yields its
	// 100th token, and decodes its last 200 tokens.
	want := []Event{
		{Kind: FirstToken, ID: 1, Session: 1, At: 48 * ms},
		{Kind: FirstToken, ID: 2, Session: 2, At: 96170 * time.Microsecond},
		{Kind: Finished, ID: 1, Session: 1, At: 2547490 * time.Microsecond, PromptTokens: 400, OutputTokens: 300},
		{Kind: Finished, ID: 2, Session: 2, At: 4239390 * time.Microsecond, PromptTokens: 400, OutputTokens: 300, Preemptions: 1},
	}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("events:\n got %+v\nwant %+v", ev, want)
	}
	if got := w.Totals().Preemptions; got != 1 {
		t.Errorf("preemptions = %d, want 1", got)
	}
}

func TestSubmitRejectsImpossibleRequests(t *testing.T) {
	w := newWorker(t, HalfProfile(), Options{})
	for _, r := range []Request{
		{ID: 1, PromptTokens: 0, OutputTokens: 1},
		{ID: 2, PromptTokens: 10, OutputTokens: 0},
		{ID: 3, PromptTokens: 499_999, OutputTokens: 2},
		{ID: 4, PromptTokens: 10, OutputTokens: math.MaxInt}, // the sum would overflow
	} {
		if err := w.Submit(0, r); err == nil {
			t.Errorf("Submit(%+v) = nil, want an error", r)
		}
	}
	if w.Busy() || w.Waiting() != 0 {
		t.Error("a rejected request changed the worker")
	}
}

// TestRunsEqualSteps checks that planning identical decode steps as one run
// gives exactly the events of stepping one at a time, under random arrivals
// and cancellations with a tight KV budget (so preemption happens too).
func TestRunsEqualSteps(t *testing.T) {
	p := HalfProfile()
	p.KVTokens, p.MaxSeqs = 20_000, 8
	for seed := uint64(1); seed <= 100; seed++ {
		stepped, st, sv := replay(t, p, Options{MaxStepsPerRun: 1}, seed)
		runs, rt, rv := replay(t, p, Options{}, seed)
		for i := range sv {
			if sv[i] != rv[i] {
				t.Fatalf("seed %d: at arrival %d the worker reads %+v stepping but %+v in runs", seed, i, sv[i], rv[i])
			}
		}
		if st.Steps != rt.Steps || st.BusyTime != rt.BusyTime || st.Preemptions != rt.Preemptions ||
			math.Abs(st.BatchSeconds-rt.BatchSeconds) > 1e-9 || math.Abs(st.KVTokenSeconds-rt.KVTokenSeconds) > 1e-3 {
			t.Fatalf("seed %d: totals differ:\nsteps %+v\nruns  %+v", seed, st, rt)
		}
		if len(stepped) != len(runs) {
			t.Fatalf("seed %d: %d events stepping, %d in runs", seed, len(stepped), len(runs))
		}
		for i := range stepped {
			if stepped[i] != runs[i] {
				t.Fatalf("seed %d: event %d differs: stepping %+v, runs %+v", seed, i, stepped[i], runs[i])
			}
		}
	}
}

// view is what a picker reads from a worker.
type view struct{ kv, cache, session int }

func replay(t *testing.T, p Profile, opts Options, seed uint64) ([]Event, Totals, []view) {
	t.Helper()
	w := newWorker(t, p, opts)
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []Event
	var views []view
	now := time.Duration(0)
	advanceTo := func(to time.Duration) {
		for {
			at, ok := w.NextEventAt()
			if !ok || at > to {
				return
			}
			out = w.Advance(at, out)
		}
	}
	for i := range 200 {
		now += time.Duration(rng.ExpFloat64() * float64(80*ms))
		advanceTo(now)
		// What a picker reads without changing the worker, then after Sync.
		kvAt, cachedAt := w.KVUsedAt(now), w.CachedTokensAt(now, uint64(i%15+1))
		w.Sync(now)
		if kvAt != w.KVUsed() || cachedAt != w.CachedTokens(uint64(i%15+1)) {
			t.Fatalf("seed %d: at %v KVUsedAt/CachedTokensAt read %d/%d, Sync gives %d/%d", seed, now, kvAt, cachedAt, w.KVUsed(), w.CachedTokens(uint64(i%15+1)))
		}
		views = append(views, view{w.KVUsed(), w.CacheTokens(), w.CachedTokens(uint64(i%15 + 1))})
		if i > 10 && rng.IntN(6) == 0 {
			w.Cancel(now, uint64(i-rng.IntN(10)))
			continue
		}
		must(t, w.Submit(now, Request{ID: uint64(i), Session: uint64(rng.IntN(15) + 1),
			PromptTokens: 100 + rng.IntN(3000), OutputTokens: 1 + rng.IntN(200)}))
	}
	advanceTo(time.Hour)
	if w.Busy() {
		t.Fatal("worker still busy after an hour")
	}
	return out, w.Totals(), views
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestProfileValidate(t *testing.T) {
	bad := HalfProfile()
	bad.BaseMs, bad.MaxSeqs, bad.PrefillChunk = 0, 0, -1
	if err := bad.Validate(); err == nil {
		t.Fatal("invalid profile passed validation")
	}
	for _, name := range []string{"half", "full"} {
		p, err := ProfileByName(name)
		if err != nil || p.Validate() != nil {
			t.Errorf("built-in profile %q: %v %v", name, err, p.Validate())
		}
	}
	tiny := HalfProfile()
	tiny.BaseMs, tiny.PerDecodeSeqMs, tiny.PerPrefillTokenMs = 1e-7, 0, 0 // steps of zero nanoseconds
	if err := tiny.Validate(); err == nil {
		t.Error("a profile whose steps take no time passed validation")
	}
	if _, err := ProfileByName("quarter"); err == nil {
		t.Error("unknown profile accepted")
	}
}

func BenchmarkWorkerSaturated(b *testing.B) {
	w, _ := NewWorker(HalfProfile(), Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	var out []Event
	now := time.Duration(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now += 40 * ms
		for {
			at, ok := w.NextEventAt()
			if !ok || at > now {
				break
			}
			out = w.Advance(at, out[:0])
		}
		_ = w.Submit(now, Request{ID: uint64(i), Session: uint64(rng.IntN(50) + 1), PromptTokens: 2000 + rng.IntN(8000), OutputTokens: 128 + rng.IntN(128)})
	}
}

func TestTimeWeightedTotals(t *testing.T) {
	w := newWorker(t, HalfProfile(), Options{})
	must(t, w.Submit(0, Request{ID: 1, Session: 1, PromptTokens: 1000, OutputTokens: 3}))
	must(t, w.Submit(0, Request{ID: 2, Session: 2, PromptTokens: 1000, OutputTokens: 3}))
	drain(t, w)
	// Request 1 prefills alone (108 ms, 1000 KV tokens reserved); request 2
	// prefills beside it (8 + 0.17 + 100 = 108.17 ms, 2001 tokens); both decode
	// (8.34 ms, 2003 tokens) and request 1 is done; request 2 decodes its last
	// token alone (8.17 ms, 1002 tokens).
	tot := w.Totals()
	busy := 0.108 + 0.10817 + 0.00834 + 0.00817
	batch := 1*0.108 + 2*0.10817 + 2*0.00834 + 1*0.00817
	kv := 1000*0.108 + 2001*0.10817 + 2003*0.00834 + 1002*0.00817
	if d := tot.BusyTime.Seconds() - busy; d > 1e-9 || d < -1e-9 {
		t.Errorf("busy %v s, want %v", tot.BusyTime.Seconds(), busy)
	}
	if d := tot.BatchSeconds - batch; d > 1e-9 || d < -1e-9 {
		t.Errorf("batch-seconds %v, want %v", tot.BatchSeconds, batch)
	}
	if d := tot.KVTokenSeconds - kv; d > 1e-6 || d < -1e-6 {
		t.Errorf("KV token-seconds %v, want %v", tot.KVTokenSeconds, kv)
	}
}

func TestProgress(t *testing.T) {
	w := newWorker(t, HalfProfile(), Options{MaxStepsPerRun: 1})
	must(t, w.Submit(0, Request{ID: 1, Session: 1, PromptTokens: 100, OutputTokens: 3}))
	for want := 0; want <= 2; want++ {
		if g, ok := w.Progress(1); !ok || g != want {
			t.Fatalf("progress %d %v, want %d", g, ok, want)
		}
		at, _ := w.NextEventAt()
		w.Advance(at, nil)
	}
	if _, ok := w.Progress(1); ok {
		t.Error("a finished request still in progress")
	}
}

func TestSlowdownStretchesSteps(t *testing.T) {
	p := HalfProfile()
	w, err := NewWorker(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Submit(0, Request{ID: 1, Session: 1, PromptTokens: 100, OutputTokens: 50}); err != nil {
		t.Fatal(err)
	}
	normal := w.Run().StepDuration
	if err := w.SetSlowdown(0, 2.5); err != nil {
		t.Fatal(err)
	}
	at, _ := w.NextEventAt()
	w.Advance(at, nil)
	if got, want := w.Run().StepDuration, p.StepDuration(1, 0); got != time.Duration(float64(want)*2.5+0.5) || w.Slowdown() != 2.5 {
		t.Errorf("step after slowdown %v (first step %v), want 2.5 x %v", got, normal, want)
	}
	for _, bad := range []float64{0.5, math.Inf(1), math.NaN()} {
		if err := w.SetSlowdown(0, bad); err == nil {
			t.Errorf("slowdown %v accepted", bad)
		}
	}
}

// TestTotalsPlusMinus: adding a worker's counters and taking them away
// again gives the counters back, field by field.
func TestTotalsPlusMinus(t *testing.T) {
	a := Totals{Steps: 3, BusyTime: 5, BatchSeconds: 1.5, KVTokenSeconds: 7, PrefillTokens: 11, DecodeTokens: 13,
		Preemptions: 1, CacheHits: 2, CachedTokens: 17, Finished: 19, Cancelled: 23}
	b := Totals{Steps: 29, BusyTime: 31, BatchSeconds: 0.25, KVTokenSeconds: 37, PrefillTokens: 41, DecodeTokens: 43,
		Preemptions: 47, CacheHits: 53, CachedTokens: 59, Finished: 61, Cancelled: 67}
	if got := a.Plus(b).Minus(b); got != a {
		t.Fatalf("(a+b)-b = %+v, want %+v", got, a)
	}
	if got := a.Plus(b); got.Steps != 32 || got.Cancelled != 90 || got.BatchSeconds != 1.75 {
		t.Fatalf("a+b = %+v", got)
	}
}
