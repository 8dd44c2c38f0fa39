package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits of a CDF file.
const (
	maxCDFPoints = 100_000
	maxCDFBytes  = 8 << 20
)

// ParseCDF reads a total-token CDF from JSON: [[tokens, fraction], ...] with
// tokens >= 1 and increasing, fractions in (0, 1] non-decreasing, the last
// fraction 1. A point [t, f] means fraction f of requests have at most t
// total tokens (input plus output).
func ParseCDF(data []byte) (CDF, error) {
	if len(data) > maxCDFBytes {
		return nil, fmt.Errorf("CDF: %d bytes is larger than the %d-byte limit", len(data), maxCDFBytes)
	}
	var pts [][]float64
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&pts); err != nil {
		return nil, fmt.Errorf("CDF: want a JSON list of [tokens, fraction] pairs: %w", err)
	}
	if dec.More() {
		return nil, errors.New("CDF: more than one JSON value")
	}
	if len(pts) > maxCDFPoints {
		return nil, fmt.Errorf("CDF: %d points, at most %d", len(pts), maxCDFPoints)
	}
	cdf := make(CDF, 0, len(pts))
	for i, p := range pts {
		if len(p) != 2 {
			return nil, fmt.Errorf("CDF point %d: want [tokens, fraction], got %d numbers", i+1, len(p))
		}
		cdf = append(cdf, [2]float64{p[0], p[1]})
	}
	if err := cdf.Validate(); err != nil {
		return nil, err
	}
	return cdf, nil
}

// Validate reports what is wrong with a CDF.
func (c CDF) Validate() error {
	if len(c) == 0 {
		return errors.New("CDF: no points")
	}
	for i, p := range c {
		t, f := p[0], p[1]
		if !(t >= 1) || t > maxTraceTokens || t != math.Trunc(t) {
			return fmt.Errorf("CDF point %d: tokens must be a whole number in [1, %d], got %v", i+1, maxTraceTokens, t)
		}
		if !(f > 0 && f <= 1) {
			return fmt.Errorf("CDF point %d: fraction must be in (0, 1], got %v", i+1, f)
		}
		if i > 0 && (t <= c[i-1][0] || f < c[i-1][1]) {
			return fmt.Errorf("CDF point %d: tokens must increase and fractions not decrease (previous %v, this %v)", i+1, c[i-1], p)
		}
	}
	if last := c[len(c)-1][1]; last != 1 {
		return fmt.Errorf("CDF: the last fraction must be 1, got %v", last)
	}
	return nil
}

// Sample draws a total token count: an interval with its probability, then
// uniformly inside it. The first interval is [1, tokens of the first point].
func (c CDF) Sample(rng *rand.Rand) int {
	u := rng.Float64()
	i, _ := slices.BinarySearchFunc(c, u, func(p [2]float64, u float64) int {
		if p[1] <= u {
			return -1
		}
		return 1
	})
	i = min(i, len(c)-1)
	lo, flo := 1.0, 0.0
	if i > 0 {
		lo, flo = c[i-1][0]+1, c[i-1][1]
	}
	hi := c[i][0]
	if hi <= lo || c[i][1] == flo {
		return int(hi)
	}
	return int(lo + math.Floor((u-flo)/(c[i][1]-flo)*(hi-lo+1)))
}

// Fraction is the CDF at tokens: the share of requests with at most that
// many total tokens, interpolated linearly inside an interval.
func (c CDF) Fraction(tokens float64) float64 {
	lo, flo := 0.0, 0.0
	for _, p := range c {
		if tokens <= p[0] {
			if p[0] == lo {
				return p[1]
			}
			return flo + (p[1]-flo)*math.Max(0, tokens-lo)/(p[0]-lo)
		}
		lo, flo = p[0], p[1]
	}
	return 1
}

// Max is the largest total the CDF gives.
func (c CDF) Max() int { return int(c[len(c)-1][0]) }

// Category is a request's kind of content.
type Category uint8

// Categories. The planner reports them apart; they do not change the cost
// model.
const (
	Prose Category = iota
	Code
	RAG
	numCategories
)

var categoryNames = [numCategories]string{"prose", "code", "rag"}

func (c Category) String() string {
	if c < numCategories {
		return categoryNames[c]
	}
	return "category(" + strconv.Itoa(int(c)) + ")"
}

// Mix is the share of each category, indexed by Category.
type Mix [numCategories]float64

// DefaultMix is 60% prose, 25% code, 15% RAG.
func DefaultMix() Mix { return Mix{0.60, 0.25, 0.15} }

// ParseMix reads "prose=0.6,code=0.25,rag=0.15"; missing categories get 0.
// The shares must add up to 1 (within 1e-6).
func ParseMix(s string) (Mix, error) {
	var m Mix
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Mix{}, fmt.Errorf("category mix %q: want name=share pairs like prose=0.6,code=0.25,rag=0.15", s)
		}
		i := slices.Index(categoryNames[:], strings.TrimSpace(name))
		if i < 0 {
			return Mix{}, fmt.Errorf("category mix: unknown category %q (known: %s)", name, strings.Join(categoryNames[:], ", "))
		}
		if seen[name] {
			return Mix{}, fmt.Errorf("category mix: %q given twice", name)
		}
		seen[name] = true
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || !(v >= 0 && v <= 1) {
			return Mix{}, fmt.Errorf("category mix: share of %s must be a number in [0, 1], got %q", name, val)
		}
		m[i] = v
	}
	if sum := m[0] + m[1] + m[2]; math.Abs(sum-1) > 1e-6 {
		return Mix{}, fmt.Errorf("category mix: shares add up to %v, want 1", sum)
	}
	return m, nil
}

func (m Mix) draw(rng *rand.Rand) Category {
	u := rng.Float64()
	for c := range numCategories - 1 {
		if u < m[c] {
			return c
		}
		u -= m[c]
	}
	return numCategories - 1
}

// Synthetic is a CDF workload: totals from a CDF split into input and
// output, a category mix, and Poisson (or bursty gamma) arrivals.
type Synthetic struct {
	CDF CDF
	// InputShare is the share of a total that is input (prompt) tokens; the
	// rest, at least one token, is output. 0.8 by default.
	InputShare float64
	Mix        Mix
	// Rate is requests per second; Burstiness the squared coefficient of
	// variation of the gaps (1 is Poisson).
	Rate, Burstiness float64
}

// DefaultInputShare is the share of a request's tokens that are input.
const DefaultInputShare = 0.8

// Validate reports what is wrong.
func (s *Synthetic) Validate() error {
	var errs []error
	if err := s.CDF.Validate(); err != nil {
		errs = append(errs, err)
	}
	if !(s.InputShare > 0 && s.InputShare < 1) {
		errs = append(errs, fmt.Errorf("input share must be in (0, 1), got %v", s.InputShare))
	}
	if sum := s.Mix[0] + s.Mix[1] + s.Mix[2]; math.Abs(sum-1) > 1e-6 || s.Mix[0] < 0 || s.Mix[1] < 0 || s.Mix[2] < 0 {
		errs = append(errs, fmt.Errorf("category shares must be >= 0 and add up to 1, got %v", s.Mix))
	}
	if !(s.Rate > 0) || math.IsInf(s.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate must be a finite number > 0, got %v", s.Rate))
	}
	if !(s.Burstiness >= 0.01 && s.Burstiness <= MaxBurstiness) {
		errs = append(errs, fmt.Errorf("burstiness must be in [0.01, %d], got %v", MaxBurstiness, s.Burstiness))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	return nil
}

// Split divides a total into input and output tokens, both at least one.
func Split(total int, inputShare float64) (in, out int) {
	if total < 2 {
		return 1, 1
	}
	in = min(max(int(math.Round(float64(total)*inputShare)), 1), total-1)
	return in, total - in
}

// Generate draws the requests that arrive in [0, until), from rng.
func (s *Synthetic) Generate(until time.Duration, rng *rand.Rand) ([]TraceRequest, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	arr, err := NewBurstyArrivals(s.Rate, s.Burstiness, rng)
	if err != nil {
		return nil, err
	}
	if n := s.Rate * until.Seconds(); n > maxTraceRequests {
		return nil, fmt.Errorf("workload: %.0f requests is more than %d", n, maxTraceRequests)
	}
	var out []TraceRequest
	for at := arr.Next(0); at < until; at = arr.Next(at) {
		in, o := Split(s.CDF.Sample(rng), s.InputShare)
		out = append(out, TraceRequest{Arrival: at, InputTokens: in, OutputTokens: o, Category: s.Mix.draw(rng)})
	}
	return out, nil
}

// Retime scales a trace's arrival times so that its mean rate (requests over
// the span from the first to the last arrival) becomes rate per second; the
// order and the relative gaps stay. A trace of one request is returned as is.
func Retime(reqs []TraceRequest, rate float64) ([]TraceRequest, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("workload: rate must be a finite number > 0, got %v", rate)
	}
	out := slices.Clone(reqs)
	if len(reqs) < 2 || reqs[len(reqs)-1].Arrival <= 0 {
		return out, nil
	}
	span := reqs[len(reqs)-1].Arrival.Seconds()
	factor := float64(len(reqs)-1) / span / rate
	for i := range out {
		out[i].Arrival = time.Duration(float64(out[i].Arrival) * factor)
	}
	return out, nil
}

// Rate is a trace's mean arrival rate per second over its span (0 for fewer
// than two requests or a span of zero).
func Rate(reqs []TraceRequest) float64 {
	if len(reqs) < 2 || reqs[len(reqs)-1].Arrival <= 0 {
		return 0
	}
	return float64(len(reqs)-1) / reqs[len(reqs)-1].Arrival.Seconds()
}
