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
//
// What the summaries need is kept as the turns end: counts and token sums,
// and of each completed turn its TTFT and backend (12 bytes), so that a
// window of millions of turns costs little more than its TTFTs. The full
// records (136 bytes each) are kept too unless DropRecords was called.
type Collector struct {
	from, to   time.Duration
	slo        time.Duration
	byStart    bool
	keep       bool
	hint       int // of the turns the window will hold
	started    int
	records    []TurnRecord
	unfinished []TurnRecord

	// The window's figures, as Summary reports them (completed turns:
	// len(ttfts); failures: turns less those).
	turns, good, rejections, unfinishedN int
	prompt, cached, host                 int64
	// ttfts[i] is the TTFT in seconds of the i-th completed turn and
	// backends[i] its backend (-1 if none, or at maxBackendIndex or past).
	ttfts    []float64
	backends []int32
	// Token sums of the completed turns by backend, grown as backends appear.
	bPrompt, bCached []int64
}

// maxBackendIndex bounds the backend indices PerBackend reports on (far
// above config.MaxBackends), so that a stray index cannot make the
// collector allocate by it.
const maxBackendIndex = 1 << 20

// NewCollector measures turns in [from, to) against a TTFT SLO. expected is
// a hint of how many turns will end in the window.
func NewCollector(from, to, slo time.Duration, expected int) *Collector {
	expected = max(expected, 0)
	return &Collector{from: from, to: to, slo: slo, keep: true, hint: expected,
		ttfts: make([]float64, 0, expected), backends: make([]int32, 0, expected)}
}

func (c *Collector) in(t time.Duration) bool { return t >= c.from && t < c.to }

// SampleStarts makes the collector keep the turns that started in the window
// rather than those that ended in it, for a run that goes on past the window
// so that its turns can end (a cool-down). Call it before adding records.
func (c *Collector) SampleStarts() { c.byStart = true }

// DropRecords makes the collector keep only what Summary and PerBackend
// need, not the records themselves: Records and UnfinishedRecords return
// none. The summaries are the same either way. Call it before adding
// records.
func (c *Collector) DropRecords() { c.keep = false }

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
	if !c.in(t) {
		return
	}
	if c.keep {
		if c.records == nil {
			c.records = make([]TurnRecord, 0, c.hint)
		}
		c.records = append(c.records, r)
	}
	c.turns++
	c.rejections += r.Rejections
	if !r.Completed {
		return
	}
	if r.Good(c.slo) {
		c.good++
	}
	c.prompt += int64(r.PromptTokens)
	c.cached += int64(r.CachedTokens)
	c.host += int64(r.HostTokens)
	b := int32(-1)
	if r.Backend >= 0 && r.Backend < maxBackendIndex {
		b = int32(r.Backend)
		if r.Backend >= len(c.bPrompt) {
			c.bPrompt = append(c.bPrompt, make([]int64, r.Backend+1-len(c.bPrompt))...)
			c.bCached = append(c.bCached, make([]int64, r.Backend+1-len(c.bCached))...)
		}
		c.bPrompt[b] += int64(r.PromptTokens)
		c.bCached[b] += int64(r.CachedTokens)
	}
	c.ttfts = append(c.ttfts, r.TTFT().Seconds())
	c.backends = append(c.backends, b)
}

// Unfinished keeps the record of a turn still running when the run ended, if
// it started in the window; it counts only with SampleStarts. Its End is
// when the run ended and FirstToken is set if its current attempt has one.
func (c *Collector) Unfinished(r TurnRecord) {
	if c.byStart && c.in(r.Start) {
		c.unfinishedN++
		if c.keep {
			c.unfinished = append(c.unfinished, r)
		}
	}
}

// Records returns the kept records, in the order they ended (none after
// DropRecords).
func (c *Collector) Records() []TurnRecord {
	if c.keep && c.records == nil {
		return []TurnRecord{} // an empty window's records are none, not nil
	}
	return c.records
}

// UnfinishedRecords returns the records given to Unfinished (none after
// DropRecords).
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
	s := Summary{WindowS: (c.to - c.from).Seconds(), Started: c.started, Turns: c.turns, Unfinished: c.unfinishedN,
		Completed: len(c.ttfts), Good: c.good, Failures: c.turns - len(c.ttfts), Rejections: c.rejections}
	if s.WindowS > 0 {
		s.OfferedRPS = float64(s.Started) / s.WindowS
		s.GoodputRPS = float64(s.Good) / s.WindowS
	}
	s.SLOPct = pct(float64(s.Good), float64(s.Turns))
	s.ReusePct = pct(float64(c.cached), float64(c.prompt))
	s.HostReusePct = pct(float64(c.host), float64(c.prompt))
	ttfts := slices.Clone(c.ttfts)
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

// PerBackend summarizes completed turns by the backend that served them
// (backends 0 to backends-1, below maxBackendIndex).
func (c *Collector) PerBackend(backends int) []BackendSummary {
	// Group the TTFTs by backend in one buffer: start[b] is where backend
	// b's begin, in the order the turns ended.
	start := make([]int, backends+1)
	for _, b := range c.backends {
		if b >= 0 && int(b) < backends {
			start[b+1]++
		}
	}
	for b := range backends {
		start[b+1] += start[b]
	}
	grouped := make([]float64, start[backends])
	next := slices.Clone(start[:backends])
	for i, b := range c.backends {
		if b >= 0 && int(b) < backends {
			grouped[next[b]] = c.ttfts[i]
			next[b]++
		}
	}
	out := make([]BackendSummary, backends)
	for b := range out {
		ts := grouped[start[b]:start[b+1]]
		slices.Sort(ts)
		var prompt, cached int64
		if b < len(c.bPrompt) {
			prompt, cached = c.bPrompt[b], c.bCached[b]
		}
		out[b] = BackendSummary{Completed: len(ts), TTFTP50S: Percentile(ts, 0.5), TTFTP99S: Percentile(ts, 0.99),
			ReusePct: pct(float64(cached), float64(prompt))}
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
