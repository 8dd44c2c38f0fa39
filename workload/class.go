package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/internal/mix"
)

// Request is one request of an open-loop stream.
type Request struct {
	// At is the arrival time, from the stream's start.
	At time.Duration
	// Session groups the requests of one conversation; it is the routing
	// affinity key and the prefix-cache key. Every request of a single-turn
	// class has a session of its own. Never 0.
	Session uint64
	Turn
	// Fresh marks a prompt that shares no prefix with its session's earlier
	// requests, so no prefix cache can serve any of it.
	Fresh bool
	// Follows marks a turn of a conversation: its user sends it no earlier
	// than At and not before the session's previous request has ended (they
	// read the answer first). A driver holds it until then.
	Follows bool
}

// MaxClassRate bounds a class's request rate.
const MaxClassRate = 100_000

// Class is a named, documented and seeded generator of open-loop traffic:
// requests arrive on a schedule fixed by the rate alone, whatever the fleet
// does with them. The eight classes follow the workload classes of the
// Solyx AI Grid paper's SLO matrix (section 5.3); where the Solyx AI Grid paper gives no
// figure (an output length, a session's pace, the tiers other than the
// second), Doc says what the class uses.
type Class struct {
	Name string
	// Doc says what the class models and how it is generated.
	Doc string
	// Tiers are the class's three TTFT SLO tiers, tightest first. The middle
	// one is the Solyx AI Grid paper's tier-2 SLO; the others are half and twice it.
	Tiers [3]time.Duration
	// DefaultRate is a moderate request rate for a single run.
	DefaultRate float64
	// MeanPromptTokens and MeanOutputTokens are the means of the requests'
	// shapes. MeanNewPromptTokens is the mean number of prompt tokens beyond
	// the session's earlier context: what a perfect prefix cache still has
	// to prefill (MeanPromptTokens for classes with no reuse).
	MeanPromptTokens, MeanOutputTokens, MeanNewPromptTokens float64
	// BurstRate is the mean rate the class adds on top of the rate it is
	// given (adversarial_spike's bursts), in req/s.
	BurstRate float64
	// Sessions is true for classes whose requests come in conversations.
	Sessions bool
	// Lead is how long before time zero the class's stream begins (its
	// first requests have a negative At). A conversation class starts its
	// conversations one session length early, so that the number under way
	// ramps up to the steady state by time zero, each with its earlier turns
	// served (and cached) as in steady state. Zero for the other classes.
	Lead time.Duration

	newGen func(rate float64, rng *rand.Rand) generator
}

type generator interface{ next() Request }

// Classes returns the eight workload classes, in the Solyx AI Grid paper's order.
func Classes() []Class {
	tiers := func(tier2ms int) [3]time.Duration {
		t2 := time.Duration(tier2ms) * time.Millisecond
		return [3]time.Duration{t2 / 2, t2, 2 * t2}
	}
	single := func(prompt, spread, output int) func(float64, *rand.Rand) generator {
		return func(rate float64, rng *rand.Rand) generator {
			return &constant{period: 1 / rate, shape: uniform(prompt, spread, output), rng: rng}
		}
	}
	return []Class{
		{Name: "baseline_mixed", Tiers: tiers(1500), DefaultRate: 20,
			Doc:              "Chat and Q&A: 512 +/- 200 prompt tokens (uniform), 128 output, one request per session, evenly spaced.",
			MeanPromptTokens: 512, MeanOutputTokens: 128, MeanNewPromptTokens: 512,
			newGen: single(512, 200, 128)},
		{Name: "rapid_shift", Tiers: tiers(1500), DefaultRate: 20, Sessions: true, Lead: 7 * 4 * time.Second,
			Doc: "Sessions of 8 requests 4 s apart whose shape changes half way: each a fresh 1,024-token prompt, " +
				"asking 32 output tokens for the first four (prefill-heavy) and 512 for the last four (decode-heavy).",
			MeanPromptTokens: 1024, MeanOutputTokens: 272, MeanNewPromptTokens: 1024,
			newGen: sessions(8, 4*time.Second, func(k int) (int, int, bool) {
				if k < 4 {
					return 1024, 32, true
				}
				return 1024, 512, true
			})},
		{Name: "code_heavy", Tiers: tiers(3000), DefaultRate: 15,
			Doc:              "Copilot-style, decode-heavy: 1,024 +/- 512 prompt tokens (uniform), 192 output, one request per session, evenly spaced.",
			MeanPromptTokens: 1024, MeanOutputTokens: 192, MeanNewPromptTokens: 1024,
			newGen: single(1024, 512, 192)},
		{Name: "adversarial_spike", Tiers: tiers(3000), DefaultRate: 10, BurstRate: 50.0 / 30,
			Doc: "baseline_mixed requests at the given steady rate (10 req/s by default) plus bursts of 50 requests " +
				"at the same instant every 30 s, the first at 10 s.",
			MeanPromptTokens: 512, MeanOutputTokens: 128, MeanNewPromptTokens: 512,
			newGen: func(rate float64, rng *rand.Rand) generator {
				return &spike{steady: constant{period: 1 / rate, shape: uniform(512, 200, 128), rng: rng},
					first: 10 * time.Second, every: 30 * time.Second, size: 50}
			}},
		{Name: "multiturn", Tiers: tiers(3500), DefaultRate: 10, Sessions: true, Lead: 7 * 10 * time.Second,
			Doc: "Conversations of 8 turns 10 s apart; each turn adds 2,048 tokens, so turn k's prompt is 2,048k tokens " +
				"(16K at the eighth) and extends the previous turn's prompt and answer; 128 output tokens.",
			MeanPromptTokens: 2048 * 4.5, MeanOutputTokens: 128, MeanNewPromptTokens: (2048 + 7*(2048-128)) / 8.0,
			newGen: sessions(8, 10*time.Second, func(k int) (int, int, bool) { return 2048 * (k + 1), 128, false })},
		{Name: "rag_multidoc", Tiers: tiers(3000), DefaultRate: 5,
			Doc:              "Retrieval-augmented answers over several documents: 4,000 +/- 800 prompt tokens (uniform), 256 output, one request per session.",
			MeanPromptTokens: 4000, MeanOutputTokens: 256, MeanNewPromptTokens: 4000,
			newGen: single(4000, 800, 256)},
		{Name: "long_context", Tiers: tiers(3000), DefaultRate: 3,
			Doc:              "Long documents: 8,000 +/- 1,500 prompt tokens (uniform), 256 output, one request per session.",
			MeanPromptTokens: 8000, MeanOutputTokens: 256, MeanNewPromptTokens: 8000,
			newGen: single(8000, 1500, 256)},
		{Name: "very_long", Tiers: tiers(7000), DefaultRate: 1.5,
			Doc:              "Document summarization: 16,000 +/- 3,000 prompt tokens (uniform), 512 output, one request per session.",
			MeanPromptTokens: 16000, MeanOutputTokens: 512, MeanNewPromptTokens: 16000,
			newGen: single(16000, 3000, 512)},
	}
}

// ClassNames lists the classes in order.
func ClassNames() []string {
	var names []string
	for _, c := range Classes() {
		names = append(names, c.Name)
	}
	return names
}

// ClassByName returns the named class.
func ClassByName(name string) (*Class, error) {
	for _, c := range Classes() {
		if c.Name == name {
			return &c, nil
		}
	}
	return nil, fmt.Errorf("workload: unknown class %q (known: %s)", name, strings.Join(ClassNames(), ", "))
}

// Stream yields a class's requests in arrival order, forever. It is not
// safe for concurrent use.
type Stream struct{ gen generator }

// Stream starts the class's requests at rate req/s (the steady rate for a
// class with bursts), drawing from a generator seeded by seed and the
// class's name: the same class, rate and seed give the same requests. The
// first request is at -Lead.
func (c *Class) Stream(rate float64, seed uint64) (*Stream, error) {
	if !(rate > 0) || rate > MaxClassRate {
		return nil, fmt.Errorf("workload: class %s: rate must be > 0 and at most %d req/s, got %v", c.Name, MaxClassRate, rate)
	}
	if c.newGen == nil {
		return nil, fmt.Errorf("workload: class %q has no generator; take classes from Classes or ClassByName", c.Name)
	}
	var h uint64
	for _, b := range []byte(c.Name) {
		h = mix.Mix64(h ^ uint64(b))
	}
	return &Stream{gen: c.newGen(rate, rand.New(rand.NewPCG(seed, h)))}, nil
}

// Next returns the next request.
func (s *Stream) Next() Request { return s.gen.next() }

// at is i periods from the start.
func at(i int64, period float64) time.Duration {
	return time.Duration(math.Round(float64(i) * period * float64(time.Second)))
}

// shape draws one request's prompt and output tokens.
type shape func(rng *rand.Rand) (prompt, output int)

// uniform draws prompts uniformly from [prompt-spread, prompt+spread].
func uniform(prompt, spread, output int) shape {
	return func(rng *rand.Rand) (int, int) { return prompt - spread + rng.IntN(2*spread+1), output }
}

// constant sends single-request sessions evenly spaced, the first at 0.
type constant struct {
	period float64 // seconds
	shape  shape
	rng    *rand.Rand
	i      int64
	ids    uint64
}

func (g *constant) next() Request {
	p, o := g.shape(g.rng)
	g.ids++
	r := Request{At: at(g.i, g.period), Session: g.ids, Turn: Turn{PromptTokens: p, OutputTokens: o}, Fresh: true}
	g.i++
	return r
}

// spike adds bursts of size requests, all at one instant, every `every`
// from `first`, to a steady stream. Burst requests are single-request
// sessions of the steady stream's shape.
type spike struct {
	steady       constant
	first, every time.Duration
	size         int
	burst        int64 // index of the next burst
	left         int   // requests of the current burst still to send
	pending      *Request
}

func (g *spike) next() Request {
	if g.pending == nil {
		r := g.steady.next()
		g.pending = &r
	}
	burstAt := g.first + time.Duration(g.burst)*g.every
	if g.left == 0 && burstAt <= g.pending.At {
		g.left = g.size
	}
	if g.left > 0 {
		g.left--
		if g.left == 0 {
			g.burst++
		}
		p, o := g.steady.shape(g.steady.rng)
		g.steady.ids++
		return Request{At: burstAt, Session: g.steady.ids, Turn: Turn{PromptTokens: p, OutputTokens: o}, Fresh: true}
	}
	r := *g.pending
	g.pending = nil
	return r
}

// sessionTurns sends sessions of turns requests, gap apart, with session
// starts evenly spaced at rate/turns, so the request rate is rate over any
// window of one gap once every turn index is under way. The first session
// starts (turns-1) gaps before time zero (the class's Lead), so the rate
// ramps up to that by time zero and holds from then on. Every turn Follows
// the one before: a turn whose predecessor is still running waits for it,
// so the rate holds as long as turns end within the gap.
type sessionTurns struct {
	spacing, gap float64 // seconds
	shape        func(turn int) (prompt, output int, fresh bool)
	nextJ        []int64 // per turn k, the session whose turn k comes next
	firstJ       int64   // the first session
}

func sessions(turns int, gap time.Duration, shape func(int) (int, int, bool)) func(float64, *rand.Rand) generator {
	return func(rate float64, _ *rand.Rand) generator {
		g := &sessionTurns{spacing: float64(turns) / rate, gap: gap.Seconds(), shape: shape, nextJ: make([]int64, turns)}
		// The first session starts at or after -(turns-1) gaps.
		g.firstJ = int64(math.Ceil(-float64(turns-1)*g.gap/g.spacing - 1e-9))
		for k := range g.nextJ {
			g.nextJ[k] = g.firstJ
		}
		return g
	}
}

func (g *sessionTurns) time(j int64, k int) float64 { return float64(j)*g.spacing + float64(k)*g.gap }

func (g *sessionTurns) next() Request {
	best := 0
	for k := 1; k < len(g.nextJ); k++ {
		if g.time(g.nextJ[k], k) < g.time(g.nextJ[best], best) {
			best = k
		}
	}
	j := g.nextJ[best]
	g.nextJ[best]++
	p, o, fresh := g.shape(best)
	return Request{At: time.Duration(math.Round(g.time(j, best) * float64(time.Second))),
		Session: uint64(j-g.firstJ) + 1, Turn: Turn{Index: best, PromptTokens: p, OutputTokens: o}, Fresh: fresh, Follows: true}
}
