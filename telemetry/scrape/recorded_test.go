package scrape

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/telemetry"
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

// TestCacheTokens: the cache size from vllm:cache_config_info's block
// labels, GPU and host tier, summed over series; anything missing or
// malformed is 0 (unknown), never an error.
func TestCacheTokens(t *testing.T) {
	tests := []struct {
		name   string
		series []string // label sets of vllm:cache_config_info; none: no family
		want   int
	}{
		{"no family", nil, 0},
		{"gpu only", []string{`block_size="16",num_gpu_blocks="1000"`}, 16000},
		{"gpu and host", []string{`block_size="16",num_gpu_blocks="1000",num_cpu_blocks="500"`}, 24000},
		{"host None as vLLM writes it", []string{`block_size="16",num_gpu_blocks="1000",num_cpu_blocks="None"`}, 16000},
		{"negative host", []string{`block_size="16",num_gpu_blocks="1000",num_cpu_blocks="-5"`}, 16000},
		{"two engine cores", []string{`engine="0",block_size="16",num_gpu_blocks="1000"`, `engine="1",block_size="16",num_gpu_blocks="3000"`}, 64000},
		{"no block size", []string{`num_gpu_blocks="1000"`}, 0},
		{"zero block size", []string{`block_size="0",num_gpu_blocks="1000"`}, 0},
		{"no gpu blocks", []string{`block_size="16",num_cpu_blocks="1000"`}, 0},
		{"gpu blocks None", []string{`block_size="16",num_gpu_blocks="None"`}, 0},
		{"fractional", []string{`block_size="16.5",num_gpu_blocks="1000"`}, 0},
		{"one core unknown", []string{`engine="0",block_size="16",num_gpu_blocks="1000"`, `engine="1",block_size="16"`}, 0},
		{"beyond int64", []string{`block_size="16",num_gpu_blocks="99999999999999999999"`}, 0},
		{"huge product capped", []string{`block_size="2147483647",num_gpu_blocks="2147483647",num_cpu_blocks="2147483647"`}, telemetry.MaxCacheTokens},
		{"huge sum capped", []string{`engine="0",block_size="16",num_gpu_blocks="100000000"`, `engine="1",block_size="16",num_gpu_blocks="100000000"`}, telemetry.MaxCacheTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := "vllm:num_requests_running 1\n"
			for _, ls := range tt.series {
				page += "vllm:cache_config_info{" + ls + "} 1\n"
			}
			e, err := ParseEngine(strings.NewReader(page))
			if err != nil {
				t.Fatalf("a cache_config_info page is an error: %v", err)
			}
			if e.CacheTokens != tt.want {
				t.Errorf("cache tokens %d, want %d", e.CacheTokens, tt.want)
			}
		})
	}
}
