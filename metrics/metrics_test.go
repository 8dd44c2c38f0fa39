package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
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

// refSummary and refPerBackend compute the figures from the records
// themselves, as the collector did when it kept only them.
func refSummary(from, to, slo time.Duration, started int, recs, unfinished []TurnRecord) Summary {
	s := Summary{WindowS: (to - from).Seconds(), Started: started, Turns: len(recs), Unfinished: len(unfinished)}
	var ttfts []float64
	var prompt, cached, host int64
	for _, r := range recs {
		s.Rejections += r.Rejections
		if !r.Completed {
			s.Failures++
			continue
		}
		s.Completed++
		if r.Good(slo) {
			s.Good++
		}
		prompt += int64(r.PromptTokens)
		cached += int64(r.CachedTokens)
		host += int64(r.HostTokens)
		ttfts = append(ttfts, r.TTFT().Seconds())
	}
	if s.WindowS > 0 {
		s.OfferedRPS = float64(s.Started) / s.WindowS
		s.GoodputRPS = float64(s.Good) / s.WindowS
	}
	s.SLOPct = pct(float64(s.Good), float64(s.Turns))
	s.ReusePct = pct(float64(cached), float64(prompt))
	s.HostReusePct = pct(float64(host), float64(prompt))
	slices.Sort(ttfts)
	s.TTFTCounted = len(ttfts)
	s.TTFTP50S, s.TTFTP90S, s.TTFTP99S = Percentile(ttfts, 0.50), Percentile(ttfts, 0.90), Percentile(ttfts, 0.99)
	return s
}

func refPerBackend(recs []TurnRecord, backends int) []BackendSummary {
	ttfts := make([][]float64, backends)
	prompt := make([]int64, backends)
	cached := make([]int64, backends)
	for _, r := range recs {
		if r.Completed && r.Backend >= 0 && r.Backend < backends {
			ttfts[r.Backend] = append(ttfts[r.Backend], r.TTFT().Seconds())
			prompt[r.Backend] += int64(r.PromptTokens)
			cached[r.Backend] += int64(r.CachedTokens)
		}
	}
	out := make([]BackendSummary, backends)
	for b, ts := range ttfts {
		slices.Sort(ts)
		out[b] = BackendSummary{Completed: len(ts), TTFTP50S: Percentile(ts, 0.5), TTFTP99S: Percentile(ts, 0.99),
			ReusePct: pct(float64(cached[b]), float64(prompt[b]))}
	}
	return out
}

// TestCollectorMatchesRecords: the figures a collector keeps as turns end,
// with or without the records, equal those computed from the records, on
// random windows (TTFTs to the nanosecond, ties, failures, turns outside
// the window, backends outside PerBackend's range, unfinished turns).
func TestCollectorMatchesRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		from, to := time.Duration(rng.IntN(5))*s, time.Duration(5+rng.IntN(10))*s
		slo := time.Duration(rng.Int64N(int64(2 * s)))
		backends := 1 + rng.IntN(12)
		byStart := trial%3 == 0
		kept, dropped := NewCollector(from, to, slo, rng.IntN(8)), NewCollector(from, to, slo, 0)
		dropped.DropRecords()
		if byStart {
			kept.SampleStarts()
			dropped.SampleStarts()
		}
		var in, unfinished []TurnRecord
		started := 0
		for range rng.IntN(400) {
			start := time.Duration(rng.Int64N(int64(16 * s)))
			r := TurnRecord{Session: rng.Uint64(), Start: start, Backend: rng.IntN(backends+3) - 1,
				Rejections: rng.IntN(3), PromptTokens: rng.IntN(5000), HostTokens: rng.IntN(50)}
			r.CachedTokens = rng.IntN(r.PromptTokens + 1)
			ttft := time.Duration(rng.Int64N(int64(3 * s)))
			if rng.IntN(4) == 0 {
				ttft = time.Duration(rng.IntN(4)) * s / 2 // ties
			}
			r.FirstToken, r.End = start+ttft, start+ttft+time.Duration(rng.Int64N(int64(s)))
			r.Completed = rng.IntN(6) != 0
			if !r.Completed {
				r.FirstToken, r.Reason = 0, "timeout"
			}
			kept.TurnStarted(start)
			dropped.TurnStarted(start)
			if start >= from && start < to {
				started++
			}
			if rng.IntN(10) == 0 {
				kept.Unfinished(r)
				dropped.Unfinished(r)
				if byStart && start >= from && start < to {
					unfinished = append(unfinished, r)
				}
				continue
			}
			kept.Add(r)
			dropped.Add(r)
			if at := map[bool]time.Duration{false: r.End, true: r.Start}[byStart]; at >= from && at < to {
				in = append(in, r)
			}
		}
		want := refSummary(from, to, slo, started, in, unfinished)
		wantPer := refPerBackend(in, backends)
		for name, c := range map[string]*Collector{"kept": kept, "dropped": dropped} {
			if got := c.Summary(); got != want {
				t.Fatalf("trial %d, %s: summary\n got %+v\nwant %+v", trial, name, got, want)
			}
			if got := c.PerBackend(backends); !slices.Equal(got, wantPer) {
				t.Fatalf("trial %d, %s: per backend\n got %+v\nwant %+v", trial, name, got, wantPer)
			}
		}
		if !slices.Equal(kept.Records(), in) || len(kept.UnfinishedRecords()) != len(unfinished) {
			t.Fatalf("trial %d: kept %d records and %d unfinished, want %d and %d", trial,
				len(kept.Records()), len(kept.UnfinishedRecords()), len(in), len(unfinished))
		}
		if dropped.Records() != nil || dropped.UnfinishedRecords() != nil {
			t.Fatalf("trial %d: a collector told to drop its records kept some", trial)
		}
	}
}

// BenchmarkCollector adds a window of a million completed turns and
// summarizes it, keeping the records or not: live-bytes/turn is what the
// window holds in memory when it ends (a record is 136 bytes).
func BenchmarkCollector(b *testing.B) {
	const turns = 1 << 20
	for _, keep := range []bool{true, false} {
		b.Run(map[bool]string{true: "records", false: "figures"}[keep], func(b *testing.B) {
			b.ReportAllocs()
			var live uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c := NewCollector(0, time.Hour, s, 0)
				if !keep {
					c.DropRecords()
				}
				for i := range turns {
					at := time.Duration(i) * time.Millisecond
					c.Add(TurnRecord{Backend: i % 2000, Start: at, FirstToken: at + time.Duration(i%977)*time.Millisecond,
						End: at + s, Completed: true, PromptTokens: 1000, CachedTokens: 800})
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				live = after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
				if c.Summary().Completed != turns || len(c.PerBackend(2000)) != 2000 {
					b.Fatal("the collector lost turns")
				}
			}
			b.ReportMetric(float64(live)/turns, "live-bytes/turn")
		})
	}
}
