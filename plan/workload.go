package plan

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/workload"
)

// Workload is what the planner sizes for: a total-token CDF with Poisson
// (or bursty) arrivals, or a recorded trace. Exactly one of CDF and Trace
// is set.
type Workload struct {
	CDF workload.CDF
	// Trace is replayed in the DES with its own arrivals, lengths and block
	// hash ids, retimed to Lambda if Lambda differs from its own rate.
	Trace      []workload.TraceRequest
	InputShare float64 // CDF only; default workload.DefaultInputShare
	Mix        workload.Mix
	Burstiness float64 // CDF only; 1 is Poisson
	// Lambda is the arrival rate in requests per second (0 with a trace:
	// the trace's own rate).
	Lambda float64
	// BlockSize is the tokens per block hash id of the trace.
	BlockSize int
	// Models is the requests' model mix (for the model router); none by
	// default.
	Models []ModelShare
}

// AnalyticSamples is how many requests the analytical model draws.
const AnalyticSamples = 3000

// Validate fills defaults and reports what is wrong.
func (w *Workload) Validate() error {
	if (w.CDF == nil) == (w.Trace == nil) {
		return errors.New("plan: give a CDF or a trace (one of them)")
	}
	if w.InputShare == 0 {
		w.InputShare = workload.DefaultInputShare
	}
	if w.Mix == (workload.Mix{}) {
		w.Mix = workload.DefaultMix()
	}
	if w.Burstiness == 0 {
		w.Burstiness = 1
	}
	if w.BlockSize == 0 {
		w.BlockSize = workload.MooncakeBlockSize
	}
	if w.Trace != nil {
		if len(w.Trace) == 0 {
			return errors.New("plan: the trace has no requests")
		}
		if w.Lambda == 0 {
			w.Lambda = workload.Rate(w.Trace)
		}
		if !(w.Lambda > 0) {
			return errors.New("plan: the trace has no rate of its own (one request, or all at one instant); give --lam")
		}
	}
	if !(w.Lambda > 0) || math.IsInf(w.Lambda, 0) {
		return fmt.Errorf("plan: the arrival rate must be a finite number > 0 req/s, got %v", w.Lambda)
	}
	if w.CDF != nil {
		s := w.synthetic(w.Lambda)
		return s.Validate()
	}
	return nil
}

func (w *Workload) synthetic(lambda float64) workload.Synthetic {
	return workload.Synthetic{CDF: w.CDF, InputShare: w.InputShare, Mix: w.Mix, Rate: lambda, Burstiness: w.Burstiness}
}

// Samples draws n requests' token counts (with the trace: all its requests
// if it has at most n, else n of them at random).
func (w *Workload) Samples(n int, rng *rand.Rand) []Sample {
	out := make([]Sample, 0, n)
	if w.Trace != nil {
		pick := func(r workload.TraceRequest) {
			out = append(out, Sample{In: r.InputTokens, Out: max(r.OutputTokens, 1), Cat: r.Category})
		}
		if len(w.Trace) <= n {
			for _, r := range w.Trace {
				pick(r)
			}
		} else {
			for range n {
				pick(w.Trace[rng.IntN(len(w.Trace))])
			}
		}
		return out
	}
	for range n {
		in, o := workload.Split(w.CDF.Sample(rng), w.InputShare)
		out = append(out, Sample{In: in, Out: o})
	}
	return out
}

// MaxTokens is the largest total a request of the workload has.
func (w *Workload) MaxTokens() int {
	if w.CDF != nil {
		return w.CDF.Max()
	}
	m := 0
	for _, r := range w.Trace {
		m = max(m, r.InputTokens+max(r.OutputTokens, 1))
	}
	return m
}

// Breakpoints are the candidate short-pool thresholds: the CDF's points
// below its maximum (a trace's 20-point CDF).
func (w *Workload) Breakpoints() []int {
	cdf := w.CDF
	if cdf == nil {
		cdf, _ = workload.TraceCDF(w.Trace, 20)
	}
	var out []int
	for _, p := range cdf {
		if t := int(p[0]); t < w.MaxTokens() && p[1] > 0 {
			out = append(out, t)
		}
	}
	return slices.Compact(out)
}

// Requests are the DES's arrivals in [0, span) at rate lambda: drawn with
// seed from the CDF, or the trace retimed to lambda and cut at span.
func (w *Workload) Requests(lambda float64, span time.Duration, seed uint64) ([]workload.TraceRequest, error) {
	if w.CDF != nil {
		s := w.synthetic(lambda)
		return s.Generate(span, rand.New(rand.NewPCG(seed, 0x706c616e)))
	}
	reqs := w.Trace
	if own := workload.Rate(reqs); own > 0 && math.Abs(own-lambda) > 1e-9*lambda {
		var err error
		if reqs, err = workload.Retime(reqs, lambda); err != nil {
			return nil, err
		}
	}
	end, _ := slices.BinarySearchFunc(reqs, span, func(r workload.TraceRequest, t time.Duration) int {
		if r.Arrival < t {
			return -1
		}
		return 1
	})
	return reqs[:end], nil
}
