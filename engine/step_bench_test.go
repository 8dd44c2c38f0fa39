package engine

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkWorkerStepFleet steps the workers of a 10x-sized fleet (2,200
// half-profile workers, each kept at its sequence limit with a short queue)
// one run each in turn, as the simulator does: by the time a worker's next
// step comes, the other workers' steps have pushed its sequences out of the
// caches. One op is one Advance (with the Submits that refill the worker).
func BenchmarkWorkerStepFleet(b *testing.B) {
	const workers = 2200
	p := HalfProfile()
	rng := rand.New(rand.NewPCG(1, 2))
	id := uint64(0)
	req := func() Request {
		id++
		return Request{ID: id, Session: id, PromptTokens: 500 + rng.IntN(3000), OutputTokens: 50 + rng.IntN(400)}
	}
	ws := make([]*Worker, workers)
	for i := range ws {
		w, err := NewWorker(p, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for range p.MaxSeqs + 5 {
			if err := w.Submit(0, req()); err != nil {
				b.Fatal(err)
			}
		}
		ws[i] = w
	}
	var out []Event
	step := func(w *Worker) {
		at, ok := w.NextEventAt()
		if !ok {
			b.Fatal("an idle worker")
		}
		out = w.Advance(at, out[:0])
		for _, e := range out {
			if e.Kind == Finished {
				if err := w.Submit(at, req()); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for range 200 { // past the first prefills, into the steady state
		for _, w := range ws {
			step(w)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		step(ws[i%workers])
	}
}
