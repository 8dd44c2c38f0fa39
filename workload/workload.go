package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Config describes the sessions.
type Config struct {
	SystemPromptTokens int           `yaml:"system_prompt_tokens" json:"system_prompt_tokens"`
	UserTokensMin      int           `yaml:"user_tokens_min" json:"user_tokens_min"`
	UserTokensMax      int           `yaml:"user_tokens_max" json:"user_tokens_max"`
	OutputTokensMin    int           `yaml:"output_tokens_min" json:"output_tokens_min"`
	OutputTokensMax    int           `yaml:"output_tokens_max" json:"output_tokens_max"`
	TurnsMin           int           `yaml:"turns_min" json:"turns_min"`
	TurnsMax           int           `yaml:"turns_max" json:"turns_max"`
	ThinkTimeMean      time.Duration `yaml:"think_time_mean" json:"think_time_mean"`
}

// DefaultConfig returns the routing study's sessions.
func DefaultConfig() Config {
	return Config{SystemPromptTokens: 4000, UserTokensMin: 200, UserTokensMax: 2000,
		OutputTokensMin: 128, OutputTokensMax: 256, TurnsMin: 5, TurnsMax: 40, ThinkTimeMean: 5 * time.Second}
}

// Validate reports what is wrong with a configuration.
func (c Config) Validate() error {
	var errs []error
	if c.SystemPromptTokens < 0 {
		errs = append(errs, fmt.Errorf("system_prompt_tokens must be >= 0, got %d", c.SystemPromptTokens))
	}
	check := func(name string, lo, hi, least int) {
		if lo < least || hi < lo {
			errs = append(errs, fmt.Errorf("%s: want %d <= min <= max, got min %d max %d", name, least, lo, hi))
		}
	}
	check("user_tokens", c.UserTokensMin, c.UserTokensMax, 1)
	check("output_tokens", c.OutputTokensMin, c.OutputTokensMax, 1)
	check("turns", c.TurnsMin, c.TurnsMax, 1)
	if c.ThinkTimeMean < 0 {
		errs = append(errs, fmt.Errorf("think_time_mean must be >= 0, got %v", c.ThinkTimeMean))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	return nil
}

// MeanTurns is the mean number of turns per session.
func (c Config) MeanTurns() float64 { return float64(c.TurnsMin+c.TurnsMax) / 2 }

// SessionRate is the session arrival rate for a nominal request rate.
func (c Config) SessionRate(nominalRPS float64) float64 { return nominalRPS / c.MeanTurns() }

// Turn is one request of a session.
type Turn struct {
	Index        int
	PromptTokens int
	OutputTokens int
}

// Session is one user's conversation. It is not safe for concurrent use.
type Session struct {
	ID    uint64
	Turns int
	cfg   *Config
	// src is the session's own random stream, held by value: a simulation
	// of many sessions reads it at every turn, and a separate rand.Rand and
	// source would be two more cache misses there. A Session may be copied
	// (nothing points into it).
	src     rand.PCG
	next    int
	context int // tokens of every earlier turn's prompt additions and output
}

// NewSession starts session id of a run seeded with seed.
func (c *Config) NewSession(seed, id uint64) *Session {
	s := new(Session)
	c.StartSession(s, seed, id)
	return s
}

// StartSession starts session id of a run seeded with seed in s, for a
// caller that keeps the session inside its own state.
func (c *Config) StartSession(s *Session, seed, id uint64) {
	*s = Session{ID: id, cfg: c, src: *rand.NewPCG(seed, id), context: c.SystemPromptTokens}
	s.Turns = c.TurnsMin + s.rng().IntN(c.TurnsMax-c.TurnsMin+1)
}

// Started reports whether s was started (NewSession, StartSession), not
// the zero Session.
func (s *Session) Started() bool { return s.cfg != nil }

// rng draws from the session's stream (the rand.Rand stays on the stack).
func (s *Session) rng() *rand.Rand { return rand.New(&s.src) }

// Next returns the session's next turn; ok is false when the session is over.
func (s *Session) Next() (t Turn, ok bool) {
	if s.next >= s.Turns {
		return Turn{}, false
	}
	c := s.cfg
	user := c.UserTokensMin + s.rng().IntN(c.UserTokensMax-c.UserTokensMin+1)
	out := c.OutputTokensMin + s.rng().IntN(c.OutputTokensMax-c.OutputTokensMin+1)
	t = Turn{Index: s.next, PromptTokens: s.context + user, OutputTokens: out}
	s.context += user + out
	s.next++
	return t, true
}

// ThinkTime draws the pause before the next turn.
func (s *Session) ThinkTime() time.Duration {
	return time.Duration(s.rng().ExpFloat64() * float64(s.cfg.ThinkTimeMean))
}

// Arrivals is a renewal process: Poisson (exponential gaps), or gamma gaps
// of a given burstiness.
type Arrivals struct {
	rng   *rand.Rand
	mean  float64 // seconds between arrivals
	shape float64 // gamma shape of the gaps; 1 is exponential
}

// MaxBurstiness bounds the squared coefficient of variation of the gaps.
const MaxBurstiness = 100

// NewArrivals returns Poisson arrivals at rate per second drawing from rng.
func NewArrivals(rate float64, rng *rand.Rand) (*Arrivals, error) {
	return NewBurstyArrivals(rate, 1, rng)
}

// NewBurstyArrivals returns arrivals at rate per second whose gaps are gamma
// distributed with squared coefficient of variation burstiness (shape
// 1/burstiness): 1 is a Poisson process, more is burstier (gaps of many short
// and a few long), less is smoother, down to near-even spacing.
func NewBurstyArrivals(rate, burstiness float64, rng *rand.Rand) (*Arrivals, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("workload: arrival rate must be a finite number > 0, got %v", rate)
	}
	if !(burstiness >= 0.01 && burstiness <= MaxBurstiness) {
		return nil, fmt.Errorf("workload: burstiness (squared coefficient of variation of the gaps) must be in [0.01, %d], got %v", MaxBurstiness, burstiness)
	}
	return &Arrivals{rng: rng, mean: 1 / rate, shape: 1 / burstiness}, nil
}

// Next returns the arrival after now.
func (a *Arrivals) Next(now time.Duration) time.Duration {
	if a.shape == 1 {
		return now + time.Duration(a.rng.ExpFloat64()*a.mean*float64(time.Second))
	}
	return now + time.Duration(gamma(a.rng, a.shape)/a.shape*a.mean*float64(time.Second))
}

// gamma draws from a gamma distribution with the given shape and scale 1,
// by Marsaglia and Tsang's method (boosted by U^(1/shape) below shape 1).
func gamma(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gamma(rng, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || (u > 0 && math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v))) {
			return d * v
		}
	}
}
