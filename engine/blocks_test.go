package engine

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// blockReq is a request whose prompt is made of the given blocks of 512
// tokens, the last one holding last tokens.
func blockReq(id uint64, last, output int, hashes ...uint64) Request {
	return Request{ID: id, PromptTokens: 512*(len(hashes)-1) + last, OutputTokens: output,
		BlockHashes: hashes, BlockSize: 512}
}

func TestBlockCacheReuse(t *testing.T) {
	w := newWorker(t, HalfProfile(), Options{})
	must(t, w.Submit(0, blockReq(1, 176, 2, 1, 2, 3)))
	drain(t, w)
	if w.CacheTokens() != 1200 || w.KVUsed() != 0 {
		t.Fatalf("after one request: cache %d, KV used %d; want the 1200 prompt tokens cached and nothing held", w.CacheTokens(), w.KVUsed())
	}
	tests := []struct {
		name   string
		req    Request
		prefix int // cached prefix tokens
		cached int // of which served from cache (one token is always computed)
		// cost of the first token: 8 ms + 0.1 ms per uncached token
		firstToken time.Duration
	}{
		{"two shared blocks", blockReq(2, 76, 1, 1, 2, 9), 1024, 1024, 8*ms + 7600*time.Microsecond},
		{"first block differs", blockReq(3, 100, 1, 7, 2, 3), 0, 0, 8*ms + 112400*time.Microsecond},
		{"whole prompt cached computes one token", blockReq(4, 176, 1, 1, 2, 3), 1200, 1199, 8*ms + 100*time.Microsecond},
		{"a partial cached block matches its own tokens", blockReq(5, 512, 1, 1, 2, 3, 4), 1200, 1200, 8*ms + 84800*time.Microsecond},
	}
	start := time.Duration(0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start += 10 * time.Second
			if got := w.CachedPrefix(&tt.req); got != tt.prefix {
				t.Errorf("CachedPrefix = %d, want %d", got, tt.prefix)
			}
			must(t, w.Submit(start, tt.req))
			ev := drain(t, w)
			if ev[0].At-start != tt.firstToken || ev[1].CachedTokens != tt.cached {
				t.Errorf("first token after %v with %d cached; want %v and %d", ev[0].At-start, ev[1].CachedTokens, tt.firstToken, tt.cached)
			}
		})
	}
	if tot := w.Totals(); tot.CacheHits != 3 || tot.CachedTokens != 1024+1199+1200 {
		t.Errorf("totals: %d hits, %d cached tokens; want 3 and %d", tot.CacheHits, tot.CachedTokens, 1024+1199+1200)
	}
	// The session cache is not involved: a block request has no session entry.
	if w.CachedTokens(0) != 0 {
		t.Error("a block request left a session entry")
	}
}

// TestBlockCacheLRUOrder: a finished prompt's blocks enter the cache first
// block most recent, so eviction takes a chain from its tail, and a reused
// chain is evicted after one left alone.
func TestBlockCacheLRUOrder(t *testing.T) {
	p := HalfProfile()
	p.KVTokens, p.MaxSeqs = 4000, 4
	w := newWorker(t, p, Options{})
	must(t, w.Submit(0, blockReq(1, 512, 1, 11, 12, 13)))
	drain(t, w)
	must(t, w.Submit(time.Second, blockReq(2, 512, 1, 21, 22, 23)))
	drain(t, w)
	// Reuse chain 1: it becomes more recent than chain 2.
	must(t, w.Submit(2*time.Second, blockReq(3, 1, 1, 11, 12, 13, 14)))
	drain(t, w)
	cached := func(hashes ...uint64) int {
		r := blockReq(0, 512, 1, hashes...)
		return w.CachedPrefix(&r)
	}
	if w.CacheTokens() != 6*512+1 || cached(11, 12, 13) != 1536 || cached(21, 22, 23) != 1536 {
		t.Fatalf("cache %d tokens; chains hold %d and %d", w.CacheTokens(), cached(11, 12, 13), cached(21, 22, 23))
	}
	// A 1,500-token request needs 1,500 + 1 KV tokens: 3,073 + 1,501 > 4,000
	// frees 574 tokens, two blocks from the tail of the older chain 2.
	must(t, w.Submit(3*time.Second, Request{ID: 4, PromptTokens: 1500, OutputTokens: 1, BlockHashes: []uint64{31, 32, 33}, BlockSize: 512}))
	if got := cached(21, 22, 23); got != 512 {
		t.Errorf("chain 2 keeps %d tokens, want its first block (512): eviction goes tail first", got)
	}
	if got := cached(11, 12, 13, 14); got != 1537 {
		t.Errorf("chain 1 keeps %d tokens, want all 1537", got)
	}
	drain(t, w)
}

// TestSharedBlocksHeldOnce: two running requests that share prefix blocks
// hold them once in the KV budget, and the blocks cannot be evicted while
// held.
func TestSharedBlocksHeldOnce(t *testing.T) {
	w := newWorker(t, HalfProfile(), Options{})
	must(t, w.Submit(0, blockReq(1, 512, 1, 1, 2)))
	drain(t, w)
	must(t, w.Submit(time.Second, blockReq(2, 100, 50, 1, 2, 3)))
	must(t, w.Submit(time.Second, blockReq(3, 200, 50, 1, 2, 4)))
	// Request 3 is admitted at the end of request 2's first step. Shared:
	// 1024 tokens, held once; own: request 2's 100 prompt tokens and first
	// output token, request 3's 200 prompt tokens.
	at, _ := w.NextEventAt()
	w.Advance(at, nil)
	if got := w.KVUsed(); got != 1024+101+200 {
		t.Errorf("KV used %d, want 1325: shared blocks count once", got)
	}
	if w.CacheTokens() != 0 {
		t.Errorf("cache %d tokens, want 0: the held blocks left the LRU list", w.CacheTokens())
	}
	drain(t, w)
	if w.KVUsed() != 0 || w.CacheTokens() != 1024+100+200 {
		t.Errorf("after both: KV used %d, cache %d; want 0 and 1324", w.KVUsed(), w.CacheTokens())
	}
}

// TestBlockRunsEqualSteps is TestRunsEqualSteps with prefix-sharing block
// requests, a tight KV budget (eviction and preemption) and cancellations.
// It also checks the budget after every event: running sequences and cache
// never hold more than the KV budget, and an idle worker holds no KV.
func TestBlockRunsEqualSteps(t *testing.T) {
	p := HalfProfile()
	p.KVTokens, p.MaxSeqs = 12_000, 8
	hits, preempted := 0, 0
	for seed := uint64(1); seed <= 60; seed++ {
		stepped, st := replayBlocks(t, p, Options{MaxStepsPerRun: 1}, seed)
		runs, rt := replayBlocks(t, p, Options{}, seed)
		if st.Steps != rt.Steps || st.BusyTime != rt.BusyTime || st.Preemptions != rt.Preemptions ||
			st.CachedTokens != rt.CachedTokens || math.Abs(st.BatchSeconds-rt.BatchSeconds) > 1e-9 {
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
		if st.CachedTokens > 0 {
			hits++
		}
		if st.Preemptions > 0 {
			preempted++
		}
	}
	// The test means something only if blocks are reused and KV runs out.
	if hits < 50 || preempted < 30 {
		t.Errorf("%d of 60 seeds reused blocks and %d preempted; the workload no longer exercises the cache", hits, preempted)
	}
}

func replayBlocks(t *testing.T, p Profile, opts Options, seed uint64) ([]Event, Totals) {
	t.Helper()
	w := newWorker(t, p, opts)
	rng := rand.New(rand.NewPCG(seed, 2))
	var out []Event
	check := func() {
		if w.KVUsed()+w.CacheTokens() > p.KVTokens || w.KVUsed() < 0 || w.CacheTokens() < 0 {
			t.Fatalf("seed %d: KV used %d + cache %d > budget %d", seed, w.KVUsed(), w.CacheTokens(), p.KVTokens)
		}
	}
	advanceTo := func(to time.Duration) {
		for {
			at, ok := w.NextEventAt()
			if !ok || at > to {
				return
			}
			out = w.Advance(at, out)
			check()
		}
	}
	now := time.Duration(0)
	for i := range 150 {
		now += time.Duration(rng.ExpFloat64() * float64(60*ms))
		advanceTo(now)
		if i > 10 && rng.IntN(7) == 0 {
			w.Cancel(now, uint64(i-rng.IntN(10)))
			continue
		}
		// One of five shared documents (1-6 blocks), then 1-4 blocks of its own.
		doc := uint64(rng.IntN(5))
		var hashes []uint64
		for b := range uint64(1 + rng.IntN(6)) {
			hashes = append(hashes, doc<<32|b)
		}
		for range 1 + rng.IntN(4) {
			hashes = append(hashes, uint64(1<<40)+rng.Uint64N(1<<20))
		}
		must(t, w.Submit(now, blockReq(uint64(i), 1+rng.IntN(512), 1+rng.IntN(150), hashes...)))
		check()
	}
	advanceTo(time.Hour)
	if w.Busy() || w.KVUsed() != 0 {
		t.Fatalf("seed %d: idle worker busy %v with %d KV tokens held", seed, w.Busy(), w.KVUsed())
	}
	return out, w.Totals()
}

func TestSubmitRejectsBadBlocks(t *testing.T) {
	w := newWorker(t, HalfProfile(), Options{})
	for _, r := range []Request{
		{ID: 1, PromptTokens: 1000, OutputTokens: 1, BlockHashes: []uint64{1, 2}},                 // no block size
		{ID: 2, PromptTokens: 1025, OutputTokens: 1, BlockHashes: []uint64{1, 2}, BlockSize: 512}, // needs 3
		{ID: 3, PromptTokens: 100, OutputTokens: 1, BlockHashes: []uint64{1, 2}, BlockSize: 512},  // needs 1
	} {
		if err := w.Submit(0, r); err == nil {
			t.Errorf("Submit(%+v) = nil, want an error", r)
		}
	}
}
