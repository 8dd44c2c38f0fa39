package engined

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestStepLoopDoesNotDrift: every step ends at its planned instant however
// late the loop gets to it. One server's loop runs each step on time; the
// other's never wakes between the submissions, as when the process waits
// for a core, and catches up only when a request arrives or its state is
// read. At every instant both are in the same state: the same steps, busy
// time and tokens, and the same end planned for the step in progress. A
// step starts at the planned end of the one before it, not when the loop
// woke, so lateness does not add up over a run and the engine's throughput
// on the real clock is the core's.
func TestStepLoopDoesNotDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.GPUs = 2
		onTime, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		late, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		type req struct {
			at                     time.Duration
			session                uint64
			worker, prompt, output int
		}
		reqs := []req{{0, 1, 0, 3000, 64}, {0, 2, 1, 800, 200}, {0, 3, 0, 1500, 128},
			{430 * time.Millisecond, 4, 0, 5000, 96}, {1700 * time.Millisecond, 1, 0, 3200, 64}}
		var onStreams, lateStreams []*stream
		run := func(until time.Duration) { // on time: wake at every step's end
			for {
				onTime.mu.Lock()
				now := onTime.now()
				next := onTime.advance(now)
				onTime.mu.Unlock()
				if next < 0 || next >= until {
					time.Sleep(until - now)
					return
				}
				time.Sleep(next - now)
			}
		}
		for _, r := range reqs {
			run(r.at)
			for _, s := range []*Server{onTime, late} {
				_, st, err := s.submit(r.worker, r.session, r.prompt, r.output)
				if err != nil {
					t.Fatal(err)
				}
				if s == onTime {
					onStreams = append(onStreams, st)
				} else {
					lateStreams = append(lateStreams, st)
				}
			}
		}
		for _, at := range []time.Duration{2 * time.Second, 2500 * time.Millisecond, 6 * time.Second} {
			run(at)
			a, b := onTime.Totals(), late.Totals()
			for w := range a {
				if a[w] != b[w] {
					t.Fatalf("at %v worker %d: on time %+v, late %+v", at, w, a[w], b[w])
				}
				ea, oka := onTime.cl.Worker(w).NextEventAt()
				eb, okb := late.cl.Worker(w).NextEventAt()
				if ea != eb || oka != okb {
					t.Fatalf("at %v worker %d: next step end %v (%v) on time, %v (%v) late", at, w, ea, oka, eb, okb)
				}
			}
			for i := range onStreams {
				ga, _, da := onTime.read(onStreams[i])
				gb, _, db := late.read(lateStreams[i])
				if ga != gb || da != db {
					t.Fatalf("at %v request %d: %d tokens (done %v) on time, %d (done %v) late", at, i, ga, da, gb, db)
				}
			}
		}
		for i, st := range lateStreams {
			if g, _, done := late.read(st); !done || g != reqs[i].output {
				t.Fatalf("request %d: %d of %d tokens, done %v at the end", i, g, reqs[i].output, done)
			}
		}
	})
}
