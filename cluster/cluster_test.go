package cluster

import (
	"testing"

	"github.com/stargate-llm/stargate/engine"
)

func TestPickPrefersCacheHolder(t *testing.T) {
	p := engine.HalfProfile()
	p.MaxSeqs = 2
	b, err := New(3, p, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Session 5 finishes on the least-loaded worker 0 and is cached there.
	w, _ := b.Submit(0, engine.Request{ID: 1, Session: 5, PromptTokens: 100, OutputTokens: 1})
	if w != 0 {
		t.Fatalf("first request went to worker %d, want 0 (all idle, lowest index)", w)
	}
	for at, ok := b.Worker(0).NextEventAt(); ok; at, ok = b.Worker(0).NextEventAt() {
		b.Worker(0).Advance(at, nil)
	}
	// Load worker 0 with one other session: it still has a free slot.
	if err := b.Worker(0).Submit(0, engine.Request{ID: 2, Session: 6, PromptTokens: 100, OutputTokens: 50}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		session uint64
		want    int
	}{
		{"cached session stays with its worker", 5, 0},
		{"new session goes to the least-loaded worker", 7, 1},
	}
	for _, tt := range tests {
		if got := b.Pick(0, &engine.Request{Session: tt.session}); got != tt.want {
			t.Errorf("%s: Pick(%d) = %d, want %d", tt.name, tt.session, got, tt.want)
		}
	}
	// Fill worker 0's second slot: the cache holder is overloaded now.
	if err := b.Worker(0).Submit(0, engine.Request{ID: 3, Session: 8, PromptTokens: 100, OutputTokens: 50}); err != nil {
		t.Fatal(err)
	}
	if got := b.Pick(0, &engine.Request{Session: 5}); got != 1 {
		t.Errorf("overloaded cache holder: Pick = %d, want least-loaded worker 1", got)
	}
	if b.Load() != 2 {
		t.Errorf("Load = %d, want 2", b.Load())
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	if _, err := New(0, engine.HalfProfile(), engine.Options{}); err == nil {
		t.Error("zero workers accepted")
	}
	bad := engine.HalfProfile()
	bad.KVTokens = 0
	if _, err := New(2, bad, engine.Options{}); err == nil {
		t.Error("invalid profile accepted")
	}
}

// TestPickSpreadsEqualPrefixes: when workers cache the same prefix of a
// request (a system prompt every worker holds), the least-loaded one takes
// it; always taking the lowest index piles new conversations onto one
// worker's cache and leaves the others' caches idle.
func TestPickSpreadsEqualPrefixes(t *testing.T) {
	p := engine.HalfProfile()
	p.MaxSeqs = 4
	b, err := New(2, p, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(w int, r engine.Request) {
		t.Helper()
		if err := b.Worker(w).Submit(0, r); err != nil {
			t.Fatal(err)
		}
		for at, ok := b.Worker(w).NextEventAt(); ok; at, ok = b.Worker(w).NextEventAt() {
			b.Worker(w).Advance(at, nil)
		}
	}
	block := func(id uint64, hashes ...uint64) engine.Request {
		return engine.Request{ID: id, PromptTokens: 16 * len(hashes), OutputTokens: 1, BlockHashes: hashes, BlockSize: 16}
	}
	run(0, block(1, 100, 1)) // both workers hold the shared block 100
	run(1, block(2, 100, 2))
	if err := b.Worker(0).Submit(0, engine.Request{ID: 3, Session: 9, PromptTokens: 100, OutputTokens: 50}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  engine.Request
		want int
	}{
		{"equal prefixes: the least-loaded worker", block(4, 100, 3), 1},
		{"a longer prefix wins over load", block(5, 100, 1, 4), 0},
	}
	for _, tt := range tests {
		if got := b.Pick(0, &tt.req); got != tt.want {
			t.Errorf("%s: Pick = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestSubmitAllocatesOnlyTheSequence: Submit's pick does not move the
// request to the heap; the one allocation left is the engine's sequence.
func TestSubmitAllocatesOnlyTheSequence(t *testing.T) {
	b, err := New(4, engine.HalfProfile(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4096 { // grow the workers' queues first
		if _, err := b.Submit(0, engine.Request{ID: uint64(i), Session: uint64(i), PromptTokens: 10, OutputTokens: 1}); err != nil {
			t.Fatal(err)
		}
	}
	id := uint64(1 << 20)
	allocs := testing.AllocsPerRun(200, func() {
		id++
		if _, err := b.Submit(0, engine.Request{ID: id, Session: id, PromptTokens: 10, OutputTokens: 1}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Submit made %v allocations, want 1 (the engine's sequence)", allocs)
	}
}
