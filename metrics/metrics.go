package metrics

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// TurnRecord is the fate of one turn.
type TurnRecord struct {
	Session    uint64
	Turn       int
	Region     int
	Router     int
	Backend    int // of the last attempt, -1 if none reached a backend
	Start      time.Duration
	FirstToken time.Duration // of the successful attempt; 0 if none
	End        time.Duration
	Attempts   int
	Rejections int
	Completed  bool
	Reason     string // why it failed

	PromptTokens, CachedTokens, OutputTokens int
	// HostTokens is the part of CachedTokens the engine loaded from its
	// host-memory KV tier rather than found in GPU memory. Omitted from
	// JSON when zero, so records without a host tier encode as before.
	HostTokens int `json:",omitempty"`
}

// TTFT is the turn's time to first token; meaningful only when Completed.
func (r *TurnRecord) TTFT() time.Duration { return r.FirstToken - r.Start }

// Good reports whether the turn completed within the SLO.
func (r *TurnRecord) Good(slo time.Duration) bool { return r.Completed && r.TTFT() <= slo }

// Collector gathers the turns of one measured window. It is not safe for
// concurrent use.
type Collector struct {
	from, to   time.Duration
	slo        time.Duration
	byStart    bool
	started    int
	records    []TurnRecord
	unfinished []TurnRecord
}

// NewCollector measures turns in [from, to) against a TTFT SLO. expected is
// a hint of how many turns will end in the window.
func NewCollector(from, to, slo time.Duration, expected int) *Collector {
	return &Collector{from: from, to: to, slo: slo, records: make([]TurnRecord, 0, max(expected, 0))}
}

func (c *Collector) in(t time.Duration) bool { return t >= c.from && t < c.to }

// SampleStarts makes the collector keep the turns that started in the window
// rather than those that ended in it, for a run that goes on past the window
// so that its turns can end (a cool-down). Call it before adding records.
func (c *Collector) SampleStarts() { c.byStart = true }

// TurnStarted counts a turn that started at t.
func (c *Collector) TurnStarted(t time.Duration) {
	if c.in(t) {
		c.started++
	}
}

// Add keeps a record whose turn ended in the window (started in it, with
// SampleStarts).
func (c *Collector) Add(r TurnRecord) {
	t := r.End
	if c.byStart {
		t = r.Start
	}
	if c.in(t) {
		c.records = append(c.records, r)
	}
}

// Unfinished keeps the record of a turn still running when the run ended, if
// it started in the window; it counts only with SampleStarts. Its End is
// when the run ended and FirstToken is set if its current attempt has one.
func (c *Collector) Unfinished(r TurnRecord) {
	if c.byStart && c.in(r.Start) {
		c.unfinished = append(c.unfinished, r)
	}
}

// Records returns the kept records, in the order they ended.
func (c *Collector) Records() []TurnRecord { return c.records }

// UnfinishedRecords returns the records given to Unfinished.
func (c *Collector) UnfinishedRecords() []TurnRecord { return c.unfinished }

// Summary is a window's figures. Percentages are 0-100.
type Summary struct {
	WindowS    float64 `json:"window_s"`
	Started    int     `json:"turns_started"`
	Turns      int     `json:"turns"` // ended in the window
	Completed  int     `json:"completed"`
	Good       int     `json:"good"`
	Failures   int     `json:"failures"`
	Rejections int     `json:"rejections"`
	OfferedRPS float64 `json:"offered_rps"`
	GoodputRPS float64 `json:"goodput_rps"`
	SLOPct     float64 `json:"slo_pct"`
	// ReusePct is the share of prompt tokens served from the engines'
	// prefix caches (GPU and host tier); HostReusePct is the share served
	// from the host tier alone (part of ReusePct; absent without one).
	ReusePct     float64 `json:"reuse_pct"`
	HostReusePct float64 `json:"host_reuse_pct,omitempty"`
	TTFTP50S     float64 `json:"ttft_p50_s"`
	TTFTP90S     float64 `json:"ttft_p90_s"`
	TTFTP99S     float64 `json:"ttft_p99_s"`
	TTFTCounted  int     `json:"ttft_counted"`
	// Unfinished counts measured turns still running at the end of the run
	// (SampleStarts only); they are in neither Turns nor the percentiles.
	Unfinished int `json:"unfinished,omitempty"`
}

// Summary computes the window's figures.
func (c *Collector) Summary() Summary {
	s := Summary{WindowS: (c.to - c.from).Seconds(), Started: c.started, Turns: len(c.records), Unfinished: len(c.unfinished)}
	ttfts := make([]float64, 0, len(c.records))
	var prompt, cached, host int64
	for i := range c.records {
		r := &c.records[i]
		s.Rejections += r.Rejections
		if !r.Completed {
			s.Failures++
			continue
		}
		s.Completed++
		if r.Good(c.slo) {
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

// BackendSummary is the TTFT of the turns one backend completed.
type BackendSummary struct {
	Completed int     `json:"completed"`
	TTFTP50S  float64 `json:"ttft_p50_s"`
	TTFTP99S  float64 `json:"ttft_p99_s"`
	ReusePct  float64 `json:"reuse_pct"`
}

// PerBackend summarizes completed turns by the backend that served them.
func (c *Collector) PerBackend(backends int) []BackendSummary {
	ttfts := make([][]float64, backends)
	prompt := make([]int64, backends)
	cached := make([]int64, backends)
	for i := range c.records {
		r := &c.records[i]
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

// TTFTQuantile is the p-quantile of the turns' TTFT in seconds, counting a
// turn that failed (rejected, timed out, too long) as infinitely slow, so
// that failures cannot make a tail look healthy. It is +Inf when more than
// a share 1-p of the turns failed, and 0 with no turns.
func TTFTQuantile(records []TurnRecord, p float64) float64 {
	v := make([]float64, len(records))
	for i := range records {
		v[i] = math.Inf(1)
		if records[i].Completed {
			v[i] = records[i].TTFT().Seconds()
		}
	}
	slices.Sort(v)
	return Percentile(v, p)
}

// Percentile is the nearest-rank percentile of sorted values (0 if empty).
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

func pct(num, den float64) float64 {
	if den == 0 {
		return 0
	}
	return 100 * num / den
}

type jsonRecord struct {
	Session      uint64  `json:"session"`
	Turn         int     `json:"turn"`
	Region       int     `json:"region"`
	Router       int     `json:"router"`
	Backend      int     `json:"backend"`
	StartS       float64 `json:"start_s"`
	TTFTS        float64 `json:"ttft_s,omitempty"`
	EndS         float64 `json:"end_s"`
	Attempts     int     `json:"attempts"`
	Rejections   int     `json:"rejections"`
	Completed    bool    `json:"completed"`
	Reason       string  `json:"reason,omitempty"`
	PromptTokens int     `json:"prompt_tokens"`
	CachedTokens int     `json:"cached_tokens"`
	HostTokens   int     `json:"host_tokens,omitempty"`
	OutputTokens int     `json:"output_tokens"`
}

// WriteNDJSON writes records one JSON object per line.
func WriteNDJSON(w io.Writer, records []TurnRecord) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range records {
		r := &records[i]
		jr := jsonRecord{Session: r.Session, Turn: r.Turn, Region: r.Region, Router: r.Router, Backend: r.Backend,
			StartS: r.Start.Seconds(), EndS: r.End.Seconds(), Attempts: r.Attempts, Rejections: r.Rejections,
			Completed: r.Completed, Reason: r.Reason,
			PromptTokens: r.PromptTokens, CachedTokens: r.CachedTokens, HostTokens: r.HostTokens, OutputTokens: r.OutputTokens}
		if r.Completed {
			jr.TTFTS = r.TTFT().Seconds()
		}
		if err := enc.Encode(&jr); err != nil {
			return fmt.Errorf("metrics: writing record %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("metrics: writing records: %w", err)
	}
	return nil
}
