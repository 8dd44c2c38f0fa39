package scrape

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/telemetry"
)

func open(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseEngine(t *testing.T) {
	tests := []struct {
		file             string
		kind             string
		running, waiting float64
		kv               float64
		ttft             bool
	}{
		{"vllm.txt", "vllm", 12, 4, 0.4, true},
		{"sglang.txt", "sglang", 12, 4, 0.25, false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			e, err := ParseEngine(bytes.NewReader(open(t, tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind != tt.kind || e.Running != tt.running || e.Waiting != tt.waiting || math.Abs(e.KVFill-tt.kv) > 1e-9 || !e.HasKV || e.HasTTFT != tt.ttft {
				t.Errorf("got %+v", e)
			}
		})
	}
	if _, err := ParseEngine(strings.NewReader("# nothing here\nfoo 1\n")); !errors.Is(err, ErrNoEngineMetrics) {
		t.Errorf("text without engine gauges: %v", err)
	}
	if _, err := ParseEngine(strings.NewReader("vllm:num_requests_running{ 1\n")); err == nil {
		t.Error("malformed text accepted")
	}
	// The old vLLM name of KV usage still counts.
	e, err := ParseEngine(strings.NewReader("vllm:num_requests_running 1\nvllm:gpu_cache_usage_perc 0.7\n"))
	if err != nil || !e.HasKV || e.KVFill != 0.7 {
		t.Errorf("old KV name: %+v, %v", e, err)
	}
}

func TestHistogramQuantileAndSub(t *testing.T) {
	e, err := ParseEngine(bytes.NewReader(open(t, "vllm.txt")))
	if err != nil {
		t.Fatal(err)
	}
	h := e.TTFT
	// 100 observations: p95 falls in (1, +Inf], reported as 1; p50 at the
	// top of the (0.1, 0.5] bucket; p30 half way through it.
	for _, tt := range []struct{ q, want float64 }{{0.95, 1}, {0.5, 0.5}, {0.3, 0.3}, {0.05, 0.05}} {
		if got, ok := h.Quantile(tt.q); !ok || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("q%.2f = %v (%v), want %v", tt.q, got, ok, tt.want)
		}
	}
	prev := Histogram{Upper: h.Upper, Counts: []float64{10, 50, 50, 50}, Count: 50, Sum: 10}
	d := h.Sub(prev)
	if d.Count != 50 || d.Counts[2] != 40 {
		t.Errorf("delta %+v", d)
	}
	if got, _ := d.Quantile(0.5); math.Abs(got-0.8125) > 1e-9 {
		t.Errorf("median of the delta %v, want 0.8125 (rank 25 of the 40 new observations in (0.5,1])", got)
	}
	restarted := Histogram{Upper: h.Upper, Counts: []float64{1, 1, 1, 1}, Count: 1}
	if r := restarted.Sub(h); r.Count != 1 {
		t.Errorf("a reset counter should return the new histogram, got %+v", r)
	}
	if _, ok := (Histogram{}).Quantile(0.5); ok {
		t.Error("quantile of an empty histogram")
	}
}

func TestParseDCGM(t *testing.T) {
	gpus, err := ParseDCGM(bytes.NewReader(open(t, "dcgm.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 || gpus[0].GPU != 0 || gpus[0].UtilPct != 80 || gpus[1].FBFreeMiB != 60000 || gpus[0].Has.SMOccupancy || !gpus[0].Has.SMActive {
		t.Fatalf("got %+v", gpus)
	}
	var sig telemetry.Signals
	telemetry.Hardware(&sig, gpus)
	// SM occupancy falls back to SM activity; temperature is the hottest.
	if math.Abs(sig.GPUUtil-0.6) > 1e-9 || math.Abs(sig.MemUtil-0.5) > 1e-9 || math.Abs(sig.SMOccupancy-0.4) > 1e-9 || sig.TempC != 71 {
		t.Errorf("aggregate %+v", sig)
	}
	if _, err := ParseDCGM(strings.NewReader("DCGM_FI_DEV_GPU_UTIL 3\n")); !errors.Is(err, ErrNoGPUs) {
		t.Errorf("no gpu label: %v", err)
	}
}

// TestMockRoundTrip: the mock exporter's text parses back to its values.
func TestMockRoundTrip(t *testing.T) {
	want := []telemetry.GPUValues{
		telemetry.MockDCGM(0, telemetry.GPUState{Busy: 0.7, Batch: 10, MaxSeqs: 25, KVUsed: 300, KVTokens: 1000}),
		telemetry.MockDCGM(1, telemetry.GPUState{Busy: 1, Batch: 25, MaxSeqs: 25, KVUsed: 900, KVTokens: 1000, ThermalC: 15, ClockFactor: 0.7}),
	}
	var b bytes.Buffer
	if err := telemetry.WriteDCGM(&b, "host-1", want); err != nil {
		t.Fatal(err)
	}
	got, err := ParseDCGM(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d GPUs back, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("GPU %d:\n got  %+v\n want %+v", i, got[i], want[i])
		}
	}
}

func TestTooLarge(t *testing.T) {
	big := strings.Repeat("# padding comment line\n", MaxBytes/20)
	if _, err := ParseDCGM(strings.NewReader(big)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized input: %v", err)
	}
}

func FuzzParseEngine(f *testing.F) {
	f.Add(open(f, "vllm.txt"))
	f.Add(open(f, "sglang.txt"))
	f.Add([]byte("vllm:num_requests_running NaN\nvllm:time_to_first_token_seconds_bucket{le=\"x\"} 1\n"))
	f.Add(open(f, "recorded/vllm-docs-v1-metrics.txt"))
	f.Add([]byte("vllm:num_requests_running 0\nprocess_start_time_seconds +Inf\nvllm:cache_config_info{max_num_seqs=\"99999999999\"} 1\n"))
	f.Add([]byte("vllm:num_requests_running 0\nvllm:cache_config_info{block_size=\"2147483647\",num_gpu_blocks=\"2147483647\",num_cpu_blocks=\"2147483647\"} 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEngine(bytes.NewReader(data))
		if err != nil {
			return
		}
		if e.StartTime < 0 || math.IsInf(e.StartTime, 0) || math.IsNaN(e.StartTime) || e.MaxSeqs < 0 || e.MaxSeqs > 1<<20 {
			t.Errorf("start time or max seqs out of range: %+v", e)
		}
		if e.CacheTokens < 0 || e.CacheTokens > telemetry.MaxCacheTokens {
			t.Errorf("cache tokens %d outside 0..%d", e.CacheTokens, telemetry.MaxCacheTokens)
		}
		if e.Running < 0 || e.Waiting < 0 || e.KVFill < 0 || e.KVFill > 1 {
			t.Errorf("out of range: %+v", e)
		}
		if e.HasTTFT {
			for _, q := range []float64{0, 0.5, 0.95, 1} {
				e.TTFT.Quantile(q)
			}
			e.TTFT.Sub(e.TTFT)
		}
	})
}

func FuzzParseDCGM(f *testing.F) {
	f.Add(open(f, "dcgm.txt"))
	var b bytes.Buffer
	_ = telemetry.WriteDCGM(&b, "h", []telemetry.GPUValues{telemetry.MockDCGM(3, telemetry.GPUState{Busy: 0.5})})
	f.Add(b.Bytes())
	f.Add([]byte("DCGM_FI_DEV_GPU_UTIL{gpu=\"99999999999\"} 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		gpus, err := ParseDCGM(bytes.NewReader(data))
		if err != nil {
			return
		}
		var sig telemetry.Signals
		telemetry.Hardware(&sig, gpus)
		for _, v := range []float64{sig.GPUUtil, sig.MemUtil, sig.SMOccupancy, sig.DRAMActive} {
			if v < 0 || v > 1 {
				t.Errorf("aggregate out of [0,1]: %+v", sig)
			}
		}
	})
}
