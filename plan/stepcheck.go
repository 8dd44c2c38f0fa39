package plan

import (
	"math/rand/v2"

	"github.com/stargate-llm/stargate/engine"
)

// StepRate runs one instance of pool model m step by step at full
// concurrency (m.Slots sequences; a finished one is replaced at once by a
// request drawn from mine) for steps steps after as many of warm-up, and
// returns its completed requests per second and mean step time in seconds.
// Unlike the analytical model and the DES engine, which charge every
// decoding sequence the pool's one mean context, each step here charges
// each decoding sequence its own context (prompt plus output so far), with
// the profile's per-sequence cost taken as affine in the context (as the
// manual and computed profiles are); prefill tokens cost the engine's
// per-token figure, up to the step's token budget after one token per
// decoding sequence, first admitted first.
func StepRate(m *PoolModel, mine []Sample, steps int, seed uint64) (rate, step float64) {
	if m.Empty() || len(mine) == 0 || steps < 1 {
		return 0, 0
	}
	// per-sequence decode cost = a + b ctx, from the profile at two contexts
	lo := m.Profile.EngineFor(PoolShape{MeanInput: m.Shape.MeanInput, MeanContext: 0, MaxTokens: m.MaxTokens})
	hi := m.Profile.EngineFor(PoolShape{MeanInput: m.Shape.MeanInput, MeanContext: 1 << 20, MaxTokens: m.MaxTokens})
	a, b := lo.PerDecodeSeqMs, (hi.PerDecodeSeqMs-lo.PerDecodeSeqMs)/(1<<20)
	e := m.Engine
	chunk := e.PrefillChunk
	if chunk == 0 {
		chunk = engine.DefaultPrefillChunk
	}
	type seq struct{ in, out, pre, gen int }
	rng := rand.New(rand.NewPCG(seed, 0x73746570))
	draw := func() seq {
		s := mine[rng.IntN(len(mine))]
		return seq{in: s.In, out: max(s.Out, 1)}
	}
	slots := make([]seq, m.Slots)
	for i := range slots {
		slots[i] = draw()
	}
	var elapsed float64
	done := 0
	for k := range 2 * steps {
		if k == steps {
			elapsed, done = 0, 0
		}
		ms := e.BaseMs
		budget := chunk
		for i := range slots { // decoding sequences: one token each
			if s := &slots[i]; s.pre == s.in {
				ms += a + b*float64(s.in+s.gen)
				budget--
			}
		}
		for i := range slots { // prefill with what is left, in slot order
			if s := &slots[i]; s.pre < s.in && budget > 0 {
				t := min(budget, s.in-s.pre)
				s.pre += t
				budget -= t
				ms += e.PerPrefillTokenMs * float64(t)
			}
		}
		for i := range slots { // the step's tokens: the first of a finished prefill too
			s := &slots[i]
			if s.pre != s.in {
				continue
			}
			s.gen++
			if s.gen >= s.out {
				slots[i] = draw()
				done++
			}
		}
		elapsed += ms / 1000
	}
	if elapsed == 0 {
		return 0, 0
	}
	return float64(done) / elapsed, elapsed / float64(steps)
}
