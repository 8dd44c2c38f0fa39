package scrape

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestRecordedVLLMPage parses the /metrics page vLLM's own documentation
// records (testdata/recorded/README.md gives its source and licence).
func TestRecordedVLLMPage(t *testing.T) {
	e, err := ParseEngine(bytes.NewReader(open(t, "recorded/vllm-docs-v1-metrics.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != "vllm" || e.Running != 8 || e.Waiting != 0 || e.HasKV || !e.HasTTFT || e.TTFT.Count != 140 {
		t.Fatalf("parsed %+v; want vllm, 8 running, 0 waiting, no KV, a TTFT histogram of 140", e)
	}
	// p95: rank 133 falls in (0.06, 0.08], which holds 123..138.
	q, ok := e.TTFT.Quantile(0.95)
	if want := 0.06 + 0.02*(133-123)/15.0; !ok || math.Abs(q-want) > 1e-9 {
		t.Errorf("TTFT p95 %v (ok %v), want %v", q, ok, want)
	}
	if e.StartTime != 0 || e.MaxSeqs != 0 {
		t.Errorf("start time %v, max seqs %d: the page has neither", e.StartTime, e.MaxSeqs)
	}
}

// TestStartTimeAndMaxSeqs: the engine's start (a restart changes it) and
// its sequence limit, where its metrics carry them.
func TestStartTimeAndMaxSeqs(t *testing.T) {
	page := `vllm:num_requests_running{model_name="m"} 0
vllm:num_requests_waiting{model_name="m"} 0
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7645e+09
vllm:cache_config_info{block_size="16",max_num_seqs="256"} 1
`
	e, err := ParseEngine(strings.NewReader(page))
	if err != nil || e.StartTime != 1.7645e9 || e.MaxSeqs != 256 {
		t.Fatalf("got %+v, %v; want start 1.7645e9 and 256 sequences", e, err)
	}
	for _, bad := range []string{`max_num_seqs="0"`, `max_num_seqs="many"`, `max_num_seqs="-4"`} {
		e, err := ParseEngine(strings.NewReader("vllm:num_requests_running 1\nvllm:cache_config_info{" + bad + "} 1\n"))
		if err != nil || e.MaxSeqs != 0 {
			t.Errorf("%s: max seqs %d, %v; want 0 (unknown)", bad, e.MaxSeqs, err)
		}
	}
}
