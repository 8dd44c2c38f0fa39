package study

import (
	"errors"
	"testing"
	"time"
)

// TestWorkerOverlapDirection: at the bounded worker overlap note's client
// counts, two slots per worker serve more submissions per second than one,
// with larger GPU batches and a shorter entrypoint queue, as the note
// reports.
func TestWorkerOverlapDirection(t *testing.T) {
	p := DefaultWorkerParams()
	for _, clients := range WorkerClients {
		one, err := RunWorker(p, clients, 1, 1, 2*time.Second, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		two, err := RunWorker(p, clients, 2, 1, 2*time.Second, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d clients: 1 slot %+v", clients, one)
		t.Logf("%d clients: 2 slots %+v", clients, two)
		if two.RPS <= one.RPS {
			t.Errorf("%d clients: 2 slots %.0f req/s, 1 slot %.0f: want overlap to raise throughput", clients, two.RPS, one.RPS)
		}
		if two.MeanBatch <= one.MeanBatch {
			t.Errorf("%d clients: mean GPU batch 2 slots %.2f, 1 slot %.2f: want it to grow", clients, two.MeanBatch, one.MeanBatch)
		}
		if two.QueueMs >= one.QueueMs {
			t.Errorf("%d clients: entrypoint queue 2 slots %.1f ms, 1 slot %.1f: want it to shrink", clients, two.QueueMs, one.QueueMs)
		}
		if one.MeanBatch > float64(p.MaxBatch) || two.MeanBatch > float64(p.MaxBatch) {
			t.Errorf("mean batch above the batch size %d: %.2f, %.2f", p.MaxBatch, one.MeanBatch, two.MeanBatch)
		}
	}
}

// TestWorkerDeterministic: the same seed gives the same run; another seed
// another one.
func TestWorkerDeterministic(t *testing.T) {
	p := DefaultWorkerParams()
	a, _ := RunWorker(p, 64, 2, 7, time.Second, 3*time.Second)
	b, _ := RunWorker(p, 64, 2, 7, time.Second, 3*time.Second)
	c, _ := RunWorker(p, 64, 2, 8, time.Second, 3*time.Second)
	if a != b {
		t.Errorf("same seed, different runs:\n%+v\n%+v", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same run %+v", a)
	}
}

// TestWorkerBatchBounds: one client never batches more than one chunk; an
// L3 share of zero sends nothing to the GPU.
func TestWorkerBatchBounds(t *testing.T) {
	p := DefaultWorkerParams()
	r, err := RunWorker(p, 1, 2, 1, time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.MeanBatch != 1 || r.RPS <= 0 {
		t.Errorf("one client: mean batch %.2f at %.0f req/s, want 1 and > 0", r.MeanBatch, r.RPS)
	}
	p.L3Share = 0
	if r, _ = RunWorker(p, 32, 1, 1, time.Second, 5*time.Second); r.ChunksPerS != 0 || r.RPS <= 0 {
		t.Errorf("no L3: %.0f chunks/s at %.0f req/s, want none", r.ChunksPerS, r.RPS)
	}
}

func TestWorkerBadRuns(t *testing.T) {
	p := DefaultWorkerParams()
	bad := []func(*WorkerParams){
		func(p *WorkerParams) { p.Workers = 0 },
		func(p *WorkerParams) { p.MaxBatch = 0 },
		func(p *WorkerParams) { p.L3Share = 1.5 },
		func(p *WorkerParams) { p.L2 = 0 },
		func(p *WorkerParams) { p.BatchDelay = -time.Millisecond },
	}
	for i, f := range bad {
		q := p
		f(&q)
		if _, err := RunWorker(q, 8, 1, 1, 0, time.Second); !errors.Is(err, ErrBadWorkerRun) {
			t.Errorf("case %d: error %v, want ErrBadWorkerRun", i, err)
		}
	}
	for _, c := range [][2]int{{0, 1}, {8, 0}} {
		if _, err := RunWorker(p, c[0], c[1], 1, 0, time.Second); !errors.Is(err, ErrBadWorkerRun) {
			t.Errorf("clients %d slots %d: error %v, want ErrBadWorkerRun", c[0], c[1], err)
		}
	}
}
