package prefix

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// fill gives n backends capacity blocks each, full of 24-block prompts that
// share their first block (a common system prompt).
func fill(tb testing.TB, n, capacity int) *Index {
	tb.Helper()
	x := New(0)
	next := uint64(1)
	prompt := make([]uint64, 24)
	for range n {
		id, err := x.Add(capacity)
		if err != nil {
			tb.Fatal(err)
		}
		for range capacity/23 + 1 {
			prompt[0] = 0
			for k := 1; k < len(prompt); k++ {
				prompt[k] = next
				next++
			}
			x.Insert(id, prompt, 0)
		}
	}
	return x
}

// BenchmarkIndexMemory measures the heap a full index holds per block and
// per backend, at the trace fleet's sizing (a 50-slot backend at 40,000
// tokens a slot in 512-token blocks: 3,906 blocks) and the live sizing
// (the same in 64-token chunks: 31,250 blocks).
func BenchmarkIndexMemory(b *testing.B) {
	for _, capacity := range []int{3906, 31250} {
		b.Run(fmt.Sprintf("blocks=%d", capacity), func(b *testing.B) {
			const backends = 8
			var perBlock float64
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				x := fill(b, backends, capacity)
				runtime.GC()
				runtime.ReadMemStats(&after)
				perBlock = float64(after.HeapAlloc-before.HeapAlloc) / float64(backends*capacity)
				runtime.KeepAlive(x)
			}
			b.ReportMetric(perBlock, "B/block")
			b.ReportMetric(perBlock*float64(capacity)/1024, "KiB/backend")
		})
	}
}

// BenchmarkMatch is one Match of a 24-block prompt whose first 16 blocks one
// backend holds, over full indexes where every backend holds the first.
func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{20, 1000} {
		b.Run(fmt.Sprintf("backends=%d", n), func(b *testing.B) {
			x := fill(b, n, 3906)
			held := make([]uint64, 24)
			for k := range held {
				held[k] = uint64(1<<40 + k)
			}
			held[0] = 0
			x.Insert(ID(n/2), held[:16], 0)
			var out []int32
			b.ReportAllocs()
			for b.Loop() {
				var best int
				if out, best = x.Match(held, time.Second, out); best != 16 {
					b.Fatalf("best %d, want 16", best)
				}
			}
		})
	}
}

// BenchmarkInsert is one Insert of a 24-block prompt into a full backend:
// 8 blocks new (evicting 8), 16 touched.
func BenchmarkInsert(b *testing.B) {
	x := fill(b, 1, 3906)
	prompt := make([]uint64, 24)
	next := uint64(1 << 41)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for k := range prompt {
			prompt[k] = uint64(1<<40 + k)
		}
		for k := 16; k < 24; k++ {
			prompt[k] = next
			next++
		}
		x.Insert(0, prompt, time.Duration(i))
	}
}
