package engine

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stargate-llm/stargate/internal/golden"
)

// TestTraceGolden pins what a worker reports, event by event, for seeded
// request streams: session caches under KV pressure with cancellations and
// preemptions (replay), and prompt blocks with a host tier (replayBlocks),
// each also stepped one at a time. A change to the cost model, admission,
// eviction or the caches must leave every trace byte-identical; go test
// ./engine -run TestTraceGolden -update rewrites them after a deliberate
// change, which the commit then explains.
func TestTraceGolden(t *testing.T) {
	sessions := HalfProfile()
	sessions.KVTokens, sessions.MaxSeqs = 12_000, 8
	blocks := blocksHostProfile()
	cases := []struct {
		name string
		run  func(opts Options, seed uint64) ([]Event, Totals)
		// covers fails the case if its streams no longer reach what it pins.
		covers func(sum Totals) error
	}{
		{"sessions", func(opts Options, seed uint64) ([]Event, Totals) {
			ev, tot, _ := replay(t, sessions, opts, seed)
			return ev, tot
		}, func(sum Totals) error {
			if sum.Preemptions == 0 || sum.Cancelled == 0 || sum.CacheHits == 0 {
				return fmt.Errorf("%d preemptions, %d cancellations, %d cache hits: want some of each", sum.Preemptions, sum.Cancelled, sum.CacheHits)
			}
			return nil
		}},
		{"blocks-host", func(opts Options, seed uint64) ([]Event, Totals) {
			return replayBlocks(t, blocks, opts, seed)
		}, func(sum Totals) error {
			if sum.HostHits == 0 || sum.CacheHits == 0 {
				return fmt.Errorf("%d host hits, %d cache hits: want some of each", sum.HostHits, sum.CacheHits)
			}
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			var sum Totals
			for _, seed := range []uint64{1, 2, 3} {
				ev, tot := c.run(Options{}, seed)
				fmt.Fprintf(&b, "seed %d: %d events\n", seed, len(ev))
				for _, e := range ev {
					fmt.Fprintf(&b, "%v kind=%d id=%d session=%d prompt=%d cached=%d host=%d output=%d preempted=%d\n",
						e.At, e.Kind, e.ID, e.Session, e.PromptTokens, e.CachedTokens, e.HostTokens, e.OutputTokens, e.Preemptions)
				}
				// The float sums to 9 digits: the last bits may differ where
				// the compiler fuses a multiply and an add (arm64).
				fmt.Fprintf(&b, "totals steps=%d busy=%v batch-s=%.9g kv-token-s=%.9g prefill=%d decode=%d preemptions=%d hits=%d cached=%d host-hits=%d host=%d finished=%d cancelled=%d\n",
					tot.Steps, tot.BusyTime, tot.BatchSeconds, tot.KVTokenSeconds, tot.PrefillTokens, tot.DecodeTokens, tot.Preemptions,
					tot.CacheHits, tot.CachedTokens, tot.HostHits, tot.HostTokens, tot.Finished, tot.Cancelled)
				sum.Preemptions += tot.Preemptions
				sum.Cancelled += tot.Cancelled
				sum.CacheHits += tot.CacheHits
				sum.HostHits += tot.HostHits
				// Stepping one at a time gives the same events (TestRunsEqualSteps
				// checks every field); the trace keeps their count and steps.
				stepped, st := c.run(Options{MaxStepsPerRun: 1}, seed)
				fmt.Fprintf(&b, "stepped: %d events, %d steps\n", len(stepped), st.Steps)
			}
			if err := c.covers(sum); err != nil {
				t.Fatalf("the streams no longer exercise what the trace pins: %v", err)
			}
			golden.Check(t, filepath.Join("testdata", "trace", c.name+".txt"), b.Bytes())
		})
	}
}
