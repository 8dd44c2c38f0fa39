package workload

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TraceRequest is one request of a recorded trace.
type TraceRequest struct {
	// Arrival is the time since the trace's first request.
	Arrival      time.Duration
	InputTokens  int
	OutputTokens int
	// BlockHashes are the prompt's prefix blocks (MooncakeBlockSize tokens
	// each, the last one possibly partial): two requests whose lists share
	// their first k ids can share k blocks of prefix cache. Nil when the
	// trace has none.
	BlockHashes []uint64
	// Category is the request's kind (Prose unless a generator set it).
	Category Category
}

// MooncakeBlockSize is the tokens per hash id in Mooncake traces.
const MooncakeBlockSize = 512

// Limits that keep a broken trace from exhausting memory.
const (
	maxTraceLine     = 4 << 20
	maxTraceRequests = 50_000_000
)

type mooncakeLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// ReadMooncake reads a Mooncake JSONL trace: one object a line with
// timestamp (ms since the trace start), input_length, output_length and
// hash_ids (one per 512-token prompt block). It is strict: unknown or missing
// fields, times that go backwards, and a hash list that does not match the
// prompt's block count are errors that name the line.
func ReadMooncake(r io.Reader) ([]TraceRequest, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxTraceLine)
	var out []TraceRequest
	prev := time.Duration(0)
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if len(out) >= maxTraceRequests {
			return nil, fmt.Errorf("mooncake trace: more than %d requests", maxTraceRequests)
		}
		var m mooncakeLine
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("mooncake trace line %d: %w", line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("mooncake trace line %d: more than one JSON value on the line", line)
		}
		if m.Timestamp == nil || m.InputLength == nil || m.OutputLength == nil {
			return nil, fmt.Errorf("mooncake trace line %d: timestamp, input_length and output_length are required", line)
		}
		ts := *m.Timestamp
		if !(ts >= 0) || ts > float64(math.MaxInt64/int64(time.Millisecond)) {
			return nil, fmt.Errorf("mooncake trace line %d: timestamp %v ms is not a time since the trace start", line, ts)
		}
		at := time.Duration(ts * float64(time.Millisecond))
		if at < prev {
			return nil, fmt.Errorf("mooncake trace line %d: timestamp %v ms goes back in time (previous %v)", line, ts, prev)
		}
		prev = at
		in, outTokens := *m.InputLength, *m.OutputLength
		if in < 1 || outTokens < 0 || in > maxTraceTokens || outTokens > maxTraceTokens {
			return nil, fmt.Errorf("mooncake trace line %d: input_length must be 1-%d and output_length 0-%d, got %d and %d",
				line, maxTraceTokens, maxTraceTokens, in, outTokens)
		}
		if want := (in + MooncakeBlockSize - 1) / MooncakeBlockSize; m.HashIDs != nil && len(m.HashIDs) != want {
			return nil, fmt.Errorf("mooncake trace line %d: %d hash_ids for %d input tokens, want %d (one per %d-token block)",
				line, len(m.HashIDs), in, want, MooncakeBlockSize)
		}
		out = append(out, TraceRequest{Arrival: at, InputTokens: in, OutputTokens: outTokens, BlockHashes: m.HashIDs})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mooncake trace after line %d: %w", len(out), err)
	}
	if len(out) == 0 {
		return nil, errors.New("mooncake trace: no requests")
	}
	return out, nil
}

// azureTimes are the Azure LLM inference traces' timestamp layouts (2023
// without a zone, 2024 with one).
var azureTimes = []string{"2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05.999999999-07:00"}

func parseAzureTime(s string) (t time.Time, err error) {
	for _, layout := range azureTimes {
		if t, err = time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return t, err
}

// maxTraceTokens bounds a request's token counts.
const maxTraceTokens = 1 << 30

// ReadAzure reads an Azure LLM inference trace CSV with the header
// TIMESTAMP,ContextTokens,GeneratedTokens. Arrivals are relative to the
// first row; rows must be in time order.
func ReadAzure(r io.Reader) ([]TraceRequest, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 3
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("azure trace: reading the header: %w", err)
	}
	if strings.TrimPrefix(header[0], "\ufeff") != "TIMESTAMP" || header[1] != "ContextTokens" || header[2] != "GeneratedTokens" {
		return nil, fmt.Errorf("azure trace: header %q, want TIMESTAMP,ContextTokens,GeneratedTokens", strings.Join(header, ","))
	}
	var out []TraceRequest
	var first, prev time.Time
	for row := 2; ; row++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("azure trace: %w", err)
		}
		if len(out) >= maxTraceRequests {
			return nil, fmt.Errorf("azure trace: more than %d requests", maxTraceRequests)
		}
		t, err := parseAzureTime(strings.TrimSpace(rec[0]))
		if err != nil {
			return nil, fmt.Errorf("azure trace row %d: timestamp %q: want like 2023-11-16 18:15:46.6805900 or 2024-05-10 00:00:00.009930+00:00", row, rec[0])
		}
		in, err1 := strconv.Atoi(strings.TrimSpace(rec[1]))
		gen, err2 := strconv.Atoi(strings.TrimSpace(rec[2]))
		if err1 != nil || err2 != nil || in < 1 || gen < 0 || in > maxTraceTokens || gen > maxTraceTokens {
			return nil, fmt.Errorf("azure trace row %d: ContextTokens %q and GeneratedTokens %q must be integers, >= 1 and >= 0, at most %d", row, rec[1], rec[2], maxTraceTokens)
		}
		if len(out) == 0 {
			first = t
		} else if t.Before(prev) {
			return nil, fmt.Errorf("azure trace row %d: timestamp goes back in time", row)
		}
		prev = t
		out = append(out, TraceRequest{Arrival: t.Sub(first), InputTokens: in, OutputTokens: gen})
	}
	if len(out) == 0 {
		return nil, errors.New("azure trace: no requests")
	}
	return out, nil
}

// CDF is a total-token distribution: points (tokens, fraction) with both
// non-decreasing and the last fraction 1. Between two points tokens are
// uniform.
type CDF [][2]float64

// TraceCDF summarizes the total tokens (input + output) of a trace's
// requests at points evenly spaced quantiles (at least 2), merging equal
// token counts.
func TraceCDF(reqs []TraceRequest, points int) (CDF, error) {
	if len(reqs) == 0 {
		return nil, errors.New("trace CDF: no requests")
	}
	if points < 2 {
		return nil, fmt.Errorf("trace CDF: want at least 2 points, got %d", points)
	}
	totals := make([]int, len(reqs))
	for i, r := range reqs {
		totals[i] = r.InputTokens + r.OutputTokens
	}
	slices.Sort(totals)
	var cdf CDF
	n := len(totals)
	for k := 1; k <= points; k++ {
		frac := float64(k) / float64(points)
		idx := (k*n+points-1)/points - 1 // ceil(k n / points) - 1, in integers: no rounding
		tokens := float64(totals[max(idx, 0)])
		if n := len(cdf); n > 0 && cdf[n-1][0] == tokens {
			cdf[n-1][1] = frac
			continue
		}
		cdf = append(cdf, [2]float64{tokens, frac})
	}
	return cdf, nil
}
