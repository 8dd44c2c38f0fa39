package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/serve/engined"
)

func TestParseStat(t *testing.T) {
	for name, tt := range map[string]struct {
		in   string
		want float64
		err  bool
	}{
		"plain":            {in: "42 (stargate) S 1 42 42 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 9 0", want: 3.8},
		"name with spaces": {in: "7 (a b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0", want: 0.03},
		"no name":          {in: "42 stargate S 1", err: true},
		"short":            {in: "42 (x) S 1 2 3", err: true},
		"not a number":     {in: "42 (x) S 1 42 42 0 -1 0 0 0 0 0 x 130 0", err: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.in))
			if (err != nil) != tt.err {
				t.Fatalf("err %v, want error %v", err, tt.err)
			}
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("%v s, want %v", got, tt.want)
			}
		})
	}
}

func TestReadStream(t *testing.T) {
	for name, tt := range map[string]struct {
		in  string
		err string
	}{
		"content then done": {in: "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"},
		"crlf":              {in: "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n"},
		"no content":        {in: "data: {\"choices\":[{\"delta\":{}}]}\n\ndata: [DONE]\n\n", err: "without content"},
		"cut":               {in: "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n", err: "cut before [DONE]"},
		"error event":       {in: "data: {\"error\":{\"message\":\"gone\"}}\n\ndata: [DONE]\n\n", err: "in-stream error: gone"},
		"bad json":          {in: "data: {nope\n\n", err: "bad SSE event"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readStream(strings.NewReader(tt.in), time.Now())
			if tt.err == "" && err != nil {
				t.Fatal(err)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err %v, want one with %q", err, tt.err)
			}
		})
	}
}

// TestReadStreamStamp: the engine's stamp before the first content event
// is its share of the TTFT; a stamp after it, or none, is not taken.
func TestReadStreamStamp(t *testing.T) {
	const content = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
	for name, tt := range map[string]struct {
		in      string
		stamped bool
		engine  time.Duration
		err     string
	}{
		"stamped":       {in: engined.TTFTStamp + "1500\n" + content + "data: [DONE]\n\n", stamped: true, engine: 1500 * time.Microsecond},
		"not stamped":   {in: content + "data: [DONE]\n\n"},
		"stamp after":   {in: content + engined.TTFTStamp + "7\n" + "data: [DONE]\n\n"},
		"bad stamp":     {in: engined.TTFTStamp + "soon\n" + content, err: "bad engine stamp"},
		"other comment": {in: ": keep-alive\n" + content + "data: [DONE]\n\n"},
	} {
		t.Run(name, func(t *testing.T) {
			tm, err := readStream(strings.NewReader(tt.in), time.Now())
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil || tm.stamped != tt.stamped || tm.engine != tt.engine || tm.ttft <= 0 {
				t.Errorf("timing %+v, err %v; want stamped %v engine %v", tm, err, tt.stamped, tt.engine)
			}
		})
	}
}

// A stream is read to the end of the body after [DONE], so that its
// connection can carry the next request.
func TestReadStreamReadsToTheEnd(t *testing.T) {
	r := strings.NewReader("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n" + strings.Repeat("x", 10000))
	if _, err := readStream(r, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 0 {
		t.Errorf("%d bytes left unread after [DONE]", r.Len())
	}
}

func TestSummarizePairsRepetitions(t *testing.T) {
	runs := []Result{
		{Label: "engine", Rep: 1, RPS: 100, TTFTP50: 1, TTFTP99: 2},
		{Label: "proxy", Rep: 1, RPS: 90, TTFTP50: 2, TTFTP99: 5, CPUPerReq: 10},
		{Label: "engine", Rep: 2, RPS: 120, TTFTP50: 3, TTFTP99: 10},
		{Label: "proxy", Rep: 2, RPS: 80, TTFTP50: 3.5, TTFTP99: 11, CPUPerReq: 30},
		{Label: "engine", Rep: 3, RPS: 110, TTFTP50: 2, TTFTP99: 4},
		{Label: "proxy", Rep: 3, RPS: 70, TTFTP50: 4, TTFTP99: 8, CPUPerReq: 20, Errors: 2},
		{Label: "nginx", Rep: 1, CPUPerReq: 4},
		{Label: "nginx", Rep: 2, CPUPerReq: 20},
		{Label: "nginx", Rep: 3, CPUPerReq: 10},
	}
	rows, err := Summarize(runs, "engine", "nginx")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Label != "engine" || rows[1].Label != "proxy" || rows[2].Label != "nginx" {
		t.Fatalf("rows %+v, want engine, proxy, nginx", rows)
	}
	p := rows[1]
	// Added TTFT pairs repetitions: p50 {1, 0.5, 2} -> 1; p99 {3, 1, 4} -> 3.
	// So does the CPU ratio: {2.5, 1.5, 2} -> 2 (the ratio of the medians
	// would be 20/10).
	want := Row{Label: "proxy", Runs: 3, RPS: 80, P50: 3.5, P99: 8, AddedP50: 1, AddedP99: 3, CPUPerReq: 20, CPUVsRef: 2, Errors: 2}
	if p != want {
		t.Errorf("proxy row %+v, want %+v", p, want)
	}
	if rows[0].Stamped != 0 || rows[0].AddedP50 != 0 || rows[0].RPS != 110 || !math.IsNaN(rows[0].CPUVsRef) || rows[2].CPUVsRef != 1 {
		t.Errorf("engine row %+v, nginx row %+v", rows[0], rows[2])
	}
	if _, err := Summarize(runs, "vllm", "nginx"); err == nil {
		t.Error("a missing baseline is not an error")
	}
	rows, err = Summarize(runs, "engine", "haproxy")
	if err != nil || !math.IsNaN(rows[1].CPUVsRef) {
		t.Errorf("without the reference: %v, ratio %v, want NaN", err, rows[1].CPUVsRef)
	}
}

// TestSummarizeOutside: the time outside the engine is a median of the
// runs' percentiles, and its added p99 pairs repetitions as added TTFT does.
func TestSummarizeOutside(t *testing.T) {
	runs := []Result{
		{Label: "engine", Rep: 1, OutsideP50: 0.1, OutsideP99: 0.3, Stamped: 100},
		{Label: "proxy", Rep: 1, OutsideP50: 0.4, OutsideP99: 1.3, Stamped: 100},
		{Label: "engine", Rep: 2, OutsideP50: 0.2, OutsideP99: 0.9, Stamped: 100},
		{Label: "proxy", Rep: 2, OutsideP50: 0.5, OutsideP99: 1.4, Stamped: 100},
		{Label: "engine", Rep: 3, OutsideP50: 0.1, OutsideP99: 0.2, Stamped: 100},
		{Label: "proxy", Rep: 3, OutsideP50: 0.6, OutsideP99: 3.2, Stamped: 100},
		{Label: "nginx", Rep: 1},
	}
	rows, err := Summarize(runs, "engine", "nginx")
	if err != nil {
		t.Fatal(err)
	}
	p := rows[1]
	// Added outside p99 by repetition: {1.0, 0.5, 3.0} -> 1.0.
	if p.Stamped != 3 || p.OutsideP50 != 0.5 || p.OutsideP99 != 1.4 || math.Abs(p.AddedOutsideP99-1.0) > 1e-9 {
		t.Errorf("proxy row %+v", p)
	}
	if rows[2].Stamped != 0 {
		t.Errorf("nginx row %+v: no stamped runs", rows[2])
	}
	var b strings.Builder
	writeTable(&b, rows, "nginx", true)
	if !strings.Contains(b.String(), "| 0.50 | 1.40 | +1.00 |") || !strings.Contains(b.String(), "| - | - | - |") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestMedianAndPercentile(t *testing.T) {
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median %v, want 2.5", m)
	}
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if p := percentile(d, 0.5); p != 5 {
		t.Errorf("p50 %v, want 5", p)
	}
	if p := percentile(d, 0.99); p != 10 {
		t.Errorf("p99 %v, want 10", p)
	}
}
