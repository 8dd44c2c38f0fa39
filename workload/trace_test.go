package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// traceDir is where the repository keeps the Mooncake traces.
var traceDir = filepath.Join("..", "traces", "mooncake")

func TestReadMooncakeShippedTraces(t *testing.T) {
	tests := []struct {
		file     string
		requests int
		last     time.Duration
	}{
		{"conversation_trace.jsonl", 12031, 3536999 * time.Millisecond},
		{"synthetic_trace.jsonl", 3993, 1022025 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join(traceDir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			reqs, err := ReadMooncake(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != tt.requests || reqs[len(reqs)-1].Arrival != tt.last {
				t.Errorf("%d requests, last at %v; want %d and %v", len(reqs), reqs[len(reqs)-1].Arrival, tt.requests, tt.last)
			}
			cdf, err := TraceCDF(reqs, 20)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(cdf); i++ {
				if cdf[i][0] <= cdf[i-1][0] || cdf[i][1] <= cdf[i-1][1] {
					t.Fatalf("CDF not increasing at %d: %v", i, cdf)
				}
			}
			if cdf[len(cdf)-1][1] != 1 {
				t.Errorf("CDF ends at %v, want 1", cdf[len(cdf)-1][1])
			}
		})
	}
}

func TestReadMooncakeFirstLines(t *testing.T) {
	in := `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}

{"timestamp": 2.5, "input_length": 512, "output_length": 1, "hash_ids": [0]}
`
	reqs, err := ReadMooncake(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || reqs[1].Arrival != 2500*time.Microsecond || reqs[0].InputTokens != 600 || len(reqs[0].BlockHashes) != 2 {
		t.Errorf("requests %+v", reqs)
	}
}

func TestReadMooncakeErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"broken JSON", `{"timestamp": 0,`, "line 1"},
		{"unknown field", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0], "tenant": 3}`, `unknown field "tenant"`},
		{"missing field", `{"timestamp": 0, "input_length": 1}`, "are required"},
		{"negative time", `{"timestamp": -1, "input_length": 1, "output_length": 1}`, "not a time"},
		{"backwards", "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 4, \"input_length\": 1, \"output_length\": 1}", "line 2: timestamp 4 ms goes back"},
		{"zero input", `{"timestamp": 0, "input_length": 0, "output_length": 1}`, "input_length must be 1-"},
		{"hash count", `{"timestamp": 0, "input_length": 1025, "output_length": 1, "hash_ids": [0, 1]}`, "2 hash_ids for 1025 input tokens, want 3"},
		{"empty", "\n\n", "no requests"},
		{"two values", `{"timestamp": 0, "input_length": 1, "output_length": 1} {"x": 1}`, "more than one JSON value"},
		{"huge length", `{"timestamp": 0, "input_length": 9223372036854775807, "output_length": 1}`, "input_length must be 1-"},
	}
	for _, tt := range tests {
		if _, err := ReadMooncake(strings.NewReader(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}

func TestReadAzure(t *testing.T) {
	in := "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2023-11-16 18:15:46.6805900,374,44\n" +
		"2023-11-16 18:15:50.9951690,396,109\n"
	reqs, err := ReadAzure(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || reqs[1].Arrival != 4314579*time.Microsecond || reqs[1].InputTokens != 396 || reqs[1].OutputTokens != 109 {
		t.Errorf("requests %+v", reqs)
	}
	// The 2024 trace writes its zone.
	in2024 := "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,2162,5\n2024-05-10 00:00:00.019930+00:00,10,1\n"
	if reqs, err = ReadAzure(strings.NewReader(in2024)); err != nil || reqs[1].Arrival != 10*time.Millisecond {
		t.Errorf("2024 trace: %+v %v", reqs, err)
	}
	for name, tt := range map[string]struct{ in, want string }{
		"bad header":    {"time,in,out\n", "want TIMESTAMP,ContextTokens,GeneratedTokens"},
		"bad time":      {"TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", "row 2: timestamp"},
		"bad count":     {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,x,1\n", "must be integers"},
		"short row":     {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,1\n", "wrong number of fields"},
		"backwards":     {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,1,1\n2023-11-16 18:15:45.1,1,1\n", "back in time"},
		"header only":   {"TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests"},
		"empty content": {"", "reading the header"},
	} {
		if _, err := ReadAzure(strings.NewReader(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tt.want)
		}
	}
}

func TestTraceCDF(t *testing.T) {
	reqs := []TraceRequest{{InputTokens: 80, OutputTokens: 20}, {InputTokens: 150, OutputTokens: 50}, {InputTokens: 150, OutputTokens: 50}, {InputTokens: 300, OutputTokens: 100}}
	cdf, err := TraceCDF(reqs, 4)
	if err != nil {
		t.Fatal(err)
	}
	// Totals 100, 200, 200, 400: quartiles 100, 200, 200, 400 merge to three points.
	want := CDF{{100, 0.25}, {200, 0.75}, {400, 1}}
	if len(cdf) != len(want) {
		t.Fatalf("cdf %v, want %v", cdf, want)
	}
	for i := range want {
		if cdf[i] != want[i] {
			t.Errorf("cdf %v, want %v", cdf, want)
		}
	}
	// Every quantile of 1..100 at 100 points is exact (no float rounding).
	var hundred []TraceRequest
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, TraceRequest{InputTokens: i})
	}
	cdf100, _ := TraceCDF(hundred, 100)
	for i, pt := range cdf100 {
		if pt[0] != float64(i+1) {
			t.Fatalf("point %d = %v, want %d tokens", i, pt, i+1)
		}
	}
	if _, err := TraceCDF(nil, 4); err == nil {
		t.Error("empty trace accepted")
	}
	if _, err := TraceCDF(reqs, 1); err == nil {
		t.Error("one point accepted")
	}
}

// checkTrace fails on any request a reader should never have accepted.
func checkTrace(t *testing.T, reqs []TraceRequest) {
	t.Helper()
	for i, r := range reqs {
		if r.InputTokens < 1 || r.OutputTokens < 0 || r.Arrival < 0 || (i > 0 && r.Arrival < reqs[i-1].Arrival) {
			t.Fatalf("accepted a bad request %+v", r)
		}
	}
}

func FuzzReadMooncake(f *testing.F) {
	f.Add(`{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`)
	f.Add("{\"timestamp\": 1e300, \"input_length\": 1, \"output_length\": 1}\n")
	f.Add(`{"timestamp": 0, "input_length": 9223372036854775807, "output_length": 1}`)
	f.Fuzz(func(t *testing.T, in string) {
		if reqs, err := ReadMooncake(strings.NewReader(in)); err == nil {
			checkTrace(t, reqs)
		}
	})
}

func FuzzReadAzure(f *testing.F) {
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n")
	f.Fuzz(func(t *testing.T, in string) {
		if reqs, err := ReadAzure(strings.NewReader(in)); err == nil {
			checkTrace(t, reqs)
		}
	})
}
