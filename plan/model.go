package plan

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/workload"
)

// Sample is a request's token counts, with what a pool router may use:
// its category and model, and a delay before it reaches the router (a
// compressed prompt's compression latency).
type Sample struct {
	In, Out int
	Cat     workload.Category
	Model   string
	Delay   time.Duration
}

// Total is input plus output tokens.
func (s Sample) Total() int { return s.In + s.Out }

// PoolModel is the analytical view of one pool: the requests it takes and
// their service on one instance of its profile at full concurrency.
type PoolModel struct {
	Name      string
	Profile   *Profile
	MaxTokens int
	// Share is the fraction of all requests routed here.
	Share  float64
	Shape  PoolShape
	Engine engine.Profile
	// Slots is the sequences one instance runs at once: the engine's
	// sequence limit, or fewer if mean-sized requests fill the KV budget.
	Slots int
	// Step is the mean step time at full concurrency; MeanService, CS2 the
	// service time's mean and squared coefficient of variation; Prefill99
	// and MeanPrefill the time to the first token once admitted.
	Step, MeanService, Prefill99, MeanPrefill time.Duration
	CS2                                       float64
	n                                         int
}

// NewPoolModel models the requests of samples whose total lies in (lo, hi]
// on profile p. share is their fraction of all samples (zero if none).
//
// At n = Slots sequences in a step, with a step budget of C tokens, request
// j takes T_j = ceil(in_j / (C - n + 1)) + out_j - 1 steps (prefill chunks
// beside n - 1 decoders, then one token a step). In steady state a step
// carries n E[out]/E[T] decoding sequences and n E[in]/E[T] prefill tokens,
// so it lasts
//
//	tau = base + per_decode_seq n E[out]/E[T] + per_prefill_token n E[in]/E[T]
//
// and S_j = T_j tau is request j's service time, P_j = ceil(in_j / (C - n +
// 1)) tau its time to first token once admitted.
func NewPoolModel(name string, p *Profile, samples []Sample, lo, hi int) (*PoolModel, error) {
	var mine []Sample
	for _, s := range samples {
		if t := s.Total(); t > lo && t <= hi {
			mine = append(mine, s)
		}
	}
	return poolModelOf(name, p, mine, len(samples), hi, KVMean)
}

// poolModelOf models the requests mine, of all requests in total, on a
// pool of profile p and max context hi, with KV reserved as kv says. A
// sample's Delay adds to its time to first token.
func poolModelOf(name string, p *Profile, mine []Sample, total, hi int, kv KVReserve) (*PoolModel, error) {
	var sumIn, sumCtx, sumTotal float64
	// In flight, a sequence holds its prompt and the output so far; one
	// seen at a random instant is drawn in proportion to its time in the
	// engine (about in/chunk + out steps): wSum, wCtx and wCtx2 weigh
	// prompt plus a uniform share of the output by that time.
	var wSum, wCtx, wCtx2 float64
	for _, s := range mine {
		in, out := float64(s.In), float64(s.Out)
		sumIn += in
		sumCtx += in + out/2
		sumTotal += float64(s.Total())
		w := in/float64(engine.DefaultPrefillChunk) + max(out, 1)
		wSum += w
		wCtx += w * (in + out/2)
		wCtx2 += w * (in*in + in*out + out*out/3)
	}
	m := &PoolModel{Name: name, Profile: p, MaxTokens: hi, n: len(mine)}
	if len(mine) == 0 {
		return m, nil
	}
	k := float64(len(mine))
	m.Share = k / float64(total)
	m.Shape = PoolShape{MeanInput: sumIn / k, MeanContext: sumCtx / k, MaxTokens: hi}
	if kv != KVMean { // a step reads the contexts in flight, whose mean is length-biased
		m.Shape.MeanContext = wCtx / wSum
	}
	m.Engine = p.EngineFor(m.Shape)
	if err := m.Engine.Validate(); err != nil {
		return nil, fmt.Errorf("plan: pool %s: %w", name, err)
	}
	if m.Engine.KVTokens < hi {
		return nil, fmt.Errorf("plan: pool %s: profile %s holds %d KV tokens, less than the pool's largest request (%d tokens); use a larger profile or a smaller max context",
			name, p.Name, m.Engine.KVTokens, hi)
	}
	var n int
	switch kv {
	case KVMaxContext:
		n = p.maxContextSlots(m.Engine, hi)
		m.Engine.MaxSeqs = n // the DES's engine then never holds more
	case KVPaged:
		mu := wCtx / wSum
		n = pagedSlots(float64(m.Engine.KVTokens), mu, math.Sqrt(math.Max(0, wCtx2/wSum-mu*mu)), m.Engine.MaxSeqs)
	default:
		n = max(1, min(m.Engine.MaxSeqs, int(float64(m.Engine.KVTokens)/(sumTotal/k))))
	}
	m.Slots = n
	chunk := m.Engine.PrefillChunk
	if chunk == 0 {
		chunk = engine.DefaultPrefillChunk
	}
	per := chunk - n + 1
	steps := make([]float64, len(mine))
	pre := make([]float64, len(mine))
	var sumSteps, sumOut float64
	for i, s := range mine {
		pre[i] = math.Ceil(float64(s.In) / float64(per))
		steps[i] = pre[i] + float64(max(s.Out, 1)-1)
		sumSteps += steps[i]
		sumOut += float64(max(s.Out, 1))
	}
	meanT := sumSteps / k
	e := m.Engine
	tau := e.BaseMs + e.PerDecodeSeqMs*float64(n)*(sumOut/k)/meanT + e.PerPrefillTokenMs*float64(n)*(sumIn/k)/meanT
	tau /= 1000 // seconds
	var sumS, sumS2, sumP float64
	for i := range mine {
		sj := steps[i] * tau
		sumS += sj
		sumS2 += sj * sj
		pre[i] = pre[i]*tau + mine[i].Delay.Seconds()
		sumP += pre[i]
	}
	mean := sumS / k
	m.Step = seconds(tau)
	m.MeanService = seconds(mean)
	m.CS2 = math.Max(0, sumS2/k/(mean*mean)-1)
	m.MeanPrefill = seconds(sumP / k)
	slices.Sort(pre)
	m.Prefill99 = seconds(pre[min(len(pre)-1, int(math.Ceil(0.99*k))-1)])
	return m, nil
}

// KVReserve is how the analytical model sizes an instance's slots (the
// sequences it runs at once) from its KV cache.
type KVReserve string

// The KV reservations (ParseKVReserve reads them).
const (
	// KVMean (the default): KV tokens / the pool's mean request (prompt
	// plus output), capped by the engine's sequence limit.
	KVMean KVReserve = "mean"
	// KVMaxContext reserves the pool's max context for every slot, as the
	// Fleet Sim model does: KV blocks / blocks of max context, and for a
	// manual profile at most max_slots x calibration_ctx / max context.
	// The DES's engine is capped at that many sequences too.
	KVMaxContext KVReserve = "max-context"
	// KVPaged follows a paged-attention engine (vLLM): blocks are taken as
	// tokens are produced, so concurrency is bounded by the tokens in
	// flight. Slots are the most sequences whose held tokens, drawn as a
	// sequence in flight holds them (length-biased: prompt plus a uniform
	// share of the output), stay within the KV cache with probability
	// 0.99 (normal approximation of their sum); each step reads that
	// length-biased mean context.
	KVPaged KVReserve = "paged"
)

// ParseKVReserve reads a KV reservation ("" is KVMean).
func ParseKVReserve(s string) (KVReserve, error) {
	switch k := KVReserve(s); k {
	case "", KVMean:
		return KVMean, nil
	case KVMaxContext, KVPaged:
		return k, nil
	}
	return "", fmt.Errorf("plan: KV reservation %q: want mean, max-context or paged", s)
}

// maxContextSlots is the slots of an instance that reserves KV for max
// context hi on every sequence: the Fleet Sim model's min(compute cap, KV
// limit) for a manual profile, KV tokens / hi otherwise; at most e.MaxSeqs'
// own bound on what a step can carry (chunk - 1).
func (p *Profile) maxContextSlots(e engine.Profile, hi int) int {
	if m := p.Manual; m != nil {
		blocks := (hi + m.BlkSize - 1) / m.BlkSize
		capN := int(int64(m.MaxSlots) * int64(m.CalibrationCtx) / int64(max(hi, 1)))
		return max(1, min(capN, m.TotalKVBlks/blocks, m.Chunk-1))
	}
	return max(1, min(e.MaxSeqs, e.KVTokens/max(hi, 1)))
}

// z99 is the standard normal's 0.99 quantile.
const z99 = 2.326

// pagedSlots is the largest n <= limit with n mu + z99 sigma sqrt(n) <= kv:
// n sequences of held tokens of mean mu and deviation sigma fit kv tokens
// with probability about 0.99.
func pagedSlots(kv, mu, sigma float64, limit int) int {
	if !(mu > 0) {
		return max(1, limit)
	}
	r := (-z99*sigma + math.Sqrt(z99*z99*sigma*sigma+4*mu*kv)) / (2 * mu)
	return max(1, min(limit, int(r*r)))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Empty reports whether no request goes to the pool.
func (m *PoolModel) Empty() bool { return m.n == 0 }

// Queue is the pool's M/G/c queue with the given instances at a total
// arrival rate lambda: c = instances x Slots servers (each KV slot a
// server), arrivals lambda x Share.
func (m *PoolModel) Queue(instances int, lambda float64) Queue {
	return Queue{Servers: instances * m.Slots, Lambda: lambda * m.Share, MeanService: m.MeanService, CS2: m.CS2}
}

// TTFT99 is the pool's analytical P99 TTFT: the P99 wait for a slot plus
// the P99 time to the first token once admitted (a sum of quantiles, so an
// upper bound of the quantile of the sum).
func (m *PoolModel) TTFT99(instances int, lambda float64) float64 {
	if m.Empty() {
		return 0
	}
	return m.Queue(instances, lambda).WaitQuantile(0.99) + m.Prefill99.Seconds()
}

// ErrCannotMeet marks a target no size can meet.
var ErrCannotMeet = errors.New("cannot meet the target")

// Size is the fewest instances whose analytical P99 TTFT is within slo and
// whose utilization is within utilCap (at most maxInstances).
func (m *PoolModel) Size(lambda float64, slo time.Duration, utilCap float64, maxInstances int) (int, error) {
	if m.Empty() {
		return 0, nil
	}
	target := slo - m.Prefill99
	if target < 0 {
		return 0, fmt.Errorf("%w: pool %s on %s: the P99 time to first token once admitted is %.2fs, above the %.2fs target, before any queueing",
			ErrCannotMeet, m.Name, m.Profile.Name, m.Prefill99.Seconds(), slo.Seconds())
	}
	servers, err := Size(m.Queue(1, lambda), target, utilCap, maxInstances*m.Slots)
	if err != nil {
		return 0, fmt.Errorf("%w: pool %s on %s: %w", ErrCannotMeet, m.Name, m.Profile.Name, err)
	}
	return (servers + m.Slots - 1) / m.Slots, nil
}
