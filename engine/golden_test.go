package engine

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden traces")

// TestTraceGolden pins what a worker reports, event by event, for seeded
// request streams: session caches under KV pressure with cancellations and
// preemptions (replay), and prompt blocks with a host tier (replayBlocks),
// each also stepped one at a time. A change to the cost model, admission,
// eviction or the caches must leave every trace byte-identical; go test
// ./engine -run TestTraceGolden -update rewrites them after a deliberate
// change, which the commit then explains.
func TestTraceGolden(t *testing.T) {
	sessions := HalfProfile()
	sessions.KVTokens, sessions.MaxSeqs = 20_000, 8
	blocks := HalfProfile()
	blocks.KVTokens, blocks.MaxSeqs = 12_000, 8
	blocks.HostKVTokens, blocks.HostKVLoadTokensPerS = 8000, 200_000
	cases := []struct {
		name string
		run  func(opts Options, seed uint64) ([]Event, Totals)
	}{
		{"sessions", func(opts Options, seed uint64) ([]Event, Totals) {
			ev, tot, _ := replay(t, sessions, opts, seed)
			return ev, tot
		}},
		{"blocks-host", func(opts Options, seed uint64) ([]Event, Totals) {
			return replayBlocks(t, blocks, opts, seed)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			for _, seed := range []uint64{1, 2, 3} {
				ev, tot := c.run(Options{}, seed)
				fmt.Fprintf(&b, "seed %d: %d events\n", seed, len(ev))
				for _, e := range ev {
					fmt.Fprintf(&b, "%v kind=%d id=%d session=%d prompt=%d cached=%d host=%d output=%d preempted=%d\n",
						e.At, e.Kind, e.ID, e.Session, e.PromptTokens, e.CachedTokens, e.HostTokens, e.OutputTokens, e.Preemptions)
				}
				fmt.Fprintf(&b, "totals %+v\n", tot)
				// Stepping one at a time gives the same events (TestRunsEqualSteps
				// checks every field); the trace keeps their count and steps.
				stepped, st := c.run(Options{MaxStepsPerRun: 1}, seed)
				fmt.Fprintf(&b, "stepped: %d events, %d steps\n", len(stepped), st.Steps)
			}
			path := filepath.Join("testdata", "trace", c.name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./engine -run TestTraceGolden -update creates it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("trace differs from %s (go test ./engine -run TestTraceGolden -update rewrites it after a deliberate change)", path)
			}
		})
	}
}
