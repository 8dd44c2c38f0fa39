package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

const s = time.Second

func TestSummaryDefinitions(t *testing.T) {
	c := NewCollector(10*s, 20*s, 2*s, 0)
	for _, at := range []time.Duration{5 * s, 10 * s, 12 * s, 19 * s, 20 * s} {
		c.TurnStarted(at) // 10, 12 and 19 are in the window
	}
	recs := []TurnRecord{
		{Start: 9 * s, FirstToken: 10 * s, End: 11 * s, Completed: true, Backend: 0, PromptTokens: 100, CachedTokens: 50}, // good
		{Start: 12 * s, FirstToken: 15 * s, End: 16 * s, Completed: true, Backend: 1, PromptTokens: 100, CachedTokens: 0}, // slow
		{Start: 13 * s, End: 17 * s, Attempts: 3, Rejections: 2, Reason: "overloaded", Backend: 1},                        // failed
		{Start: 1 * s, FirstToken: 2 * s, End: 3 * s, Completed: true},                                                    // before the window
		{Start: 19 * s, FirstToken: 19500 * time.Millisecond, End: 21 * s, Completed: true},                               // after
	}
	for _, r := range recs {
		c.Add(r)
	}
	got := c.Summary()
	want := Summary{WindowS: 10, Started: 3, Turns: 3, Completed: 2, Good: 1, Failures: 1, Rejections: 2,
		OfferedRPS: 0.3, GoodputRPS: 0.1, SLOPct: 100.0 / 3, ReusePct: 25, TTFTP50S: 1, TTFTP90S: 3, TTFTP99S: 3, TTFTCounted: 2}
	if math.Abs(got.SLOPct-want.SLOPct) > 1e-9 {
		t.Errorf("SLO %% = %v, want %v", got.SLOPct, want.SLOPct)
	}
	got.SLOPct = want.SLOPct
	if got != want {
		t.Errorf("summary:\n got %+v\nwant %+v", got, want)
	}
	pb := c.PerBackend(2)
	if pb[0].Completed != 1 || pb[1].Completed != 1 || pb[1].TTFTP50S != 3 || pb[0].ReusePct != 50 {
		t.Errorf("per backend = %+v", pb)
	}
}

// TestSampleStarts: with a cool-down, the turns that started in the window
// are measured, wherever they end, and those still running are unfinished.
func TestSampleStarts(t *testing.T) {
	c := NewCollector(10*s, 20*s, 2*s, 0)
	c.SampleStarts()
	for _, at := range []time.Duration{9 * s, 10 * s, 15 * s, 19 * s, 21 * s} {
		c.TurnStarted(at)
	}
	c.Add(TurnRecord{Start: 9 * s, FirstToken: 10 * s, End: 11 * s, Completed: true})  // started before
	c.Add(TurnRecord{Start: 10 * s, FirstToken: 11 * s, End: 12 * s, Completed: true}) // in
	c.Add(TurnRecord{Start: 19 * s, FirstToken: 22 * s, End: 24 * s, Completed: true}) // in, ends after the window
	c.Add(TurnRecord{Start: 21 * s, FirstToken: 22 * s, End: 23 * s, Completed: true}) // started after
	c.Unfinished(TurnRecord{Start: 15 * s, End: 30 * s})
	c.Unfinished(TurnRecord{Start: 21 * s, End: 30 * s})
	got := c.Summary()
	if got.Started != 3 || got.Turns != 2 || got.Unfinished != 1 || got.Started != got.Turns+got.Unfinished ||
		got.Good != 1 || got.TTFTP99S != 3 {
		t.Errorf("summary %+v: want 3 started = 2 ended + 1 unfinished, 1 good, p99 3 s", got)
	}
	if u := c.UnfinishedRecords(); len(u) != 1 || u[0].Start != 15*s {
		t.Errorf("unfinished records %+v", u)
	}
	// Without SampleStarts, unfinished turns are not kept.
	plain := NewCollector(10*s, 20*s, 2*s, 0)
	plain.Unfinished(TurnRecord{Start: 15 * s, End: 30 * s})
	if plain.Summary().Unfinished != 0 {
		t.Error("an end-sampling collector kept an unfinished turn")
	}
}

func TestPercentileNearestRank(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tt := range []struct{ p, want float64 }{{0.5, 5}, {0.9, 9}, {0.99, 10}, {0, 1}, {1, 10}} {
		if got := Percentile(v, tt.p); got != tt.want {
			t.Errorf("p%v = %v, want %v", tt.p, got, tt.want)
		}
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("empty percentile not 0")
	}
}

func TestNDJSON(t *testing.T) {
	var buf bytes.Buffer
	recs := []TurnRecord{{Session: 1, Start: s, FirstToken: 1500 * time.Millisecond, End: 2 * s, Completed: true, PromptTokens: 10}, {Session: 2, Reason: "timeout"}}
	if err := WriteNDJSON(&buf, recs); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	var lines []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["ttft_s"] != 0.5 || lines[1]["reason"] != "timeout" {
		t.Errorf("lines = %v", lines)
	}
}
