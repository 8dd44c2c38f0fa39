package gateway

import (
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// DefaultWarmUp is Config.WarmUp's default: four heartbeats, long enough
// for every router to hear Loading before the engine takes traffic, short
// next to a restart (a vLLM engine loads its weights for tens of seconds
// before it lists a model, all of it Loading already).
const DefaultWarmUp = 2 * time.Second

// EngineProbe is what a gateway's shell saw of its engine at one look:
// whether it answered at all, whether its health check passed and whether
// it lists a model (vLLM's /v1/models is empty, or not yet served, while
// the weights load).
type EngineProbe struct {
	Reachable    bool
	Healthy      bool
	ModelsListed bool
}

// Serving reports whether the engine can take a request: it answers, is
// healthy and lists a model.
func (p EngineProbe) Serving() bool { return p.Reachable && p.Healthy && p.ModelsListed }

// lifecycle is the engine's loading state as the gateway knows it (see
// ObserveEngine). The zero value is an engine never probed: serving, so
// that a caller that does not probe (the simulator without restarts) sees
// the backend Ready throughout.
type lifecycle struct {
	notServing bool          // the engine is judged not serving
	served     bool          // some probe found it serving
	badLooks   int           // looks in a row that found it reachable but not serving
	sawDown    bool          // some probe said so: a later start warms up
	warmUntil  time.Duration // the warm-up after the engine came back ends
}

// EngineDownLooks is how many looks in a row must find an engine that
// served reachable but not serving (health failing, no model listed, one
// of the two probes timing out) before its backend goes Loading: one slow
// answer from a busy engine is not a restart. An engine that answers
// nothing at all (a crash, a restart) goes Loading at the first look, and
// so does one that never served (loading its weights at start).
const EngineDownLooks = 2

// ObserveEngine hands the gateway one look at its engine. The backend is
// Loading, which no router places on, while the engine is not serving and,
// once it serves again after the gateway saw it not serving, for
// Config.WarmUp more: an engine that just came back has cold caches, and
// requests that rush at it would see its slowest answers (the cold-start
// cascade of a failover). An engine serving at the first look is Ready at
// once: it was up before the gateway. A change of state goes out with the
// next stats message, soon after (a change). While the engine does not
// serve, Offer rejects and nothing waiting is admitted; requests admitted
// when it serves again are appended to out.
func (g *Gateway) ObserveEngine(now time.Duration, p EngineProbe, out []Request) []Request {
	lc := &g.life
	wasLoading := g.Loading(now)
	switch serving := p.Serving(); {
	case !serving:
		lc.badLooks++
		if !p.Reachable || !lc.served || lc.badLooks >= EngineDownLooks {
			lc.notServing, lc.sawDown = true, true
		}
	default:
		lc.served, lc.badLooks = true, 0
		if lc.notServing {
			lc.notServing = false
			lc.warmUntil = now + g.cfg.WarmUp
		}
	}
	if g.Loading(now) != wasLoading {
		g.changed(now)
	}
	return g.admitWaiting(now, out)
}

// Loading reports whether the backend is Loading at now: its engine is not
// serving, or is still warming up after it came back.
func (g *Gateway) Loading(now time.Duration) bool {
	return g.life.notServing || (g.life.sawDown && now < g.life.warmUntil)
}

// EngineServing reports whether the last look found the engine serving.
func (g *Gateway) EngineServing() bool { return !g.life.notServing }

// WarmingUntil is when the current warm-up ends (0 when none is under way
// at now).
func (g *Gateway) WarmingUntil(now time.Duration) time.Duration {
	if g.life.notServing || now >= g.life.warmUntil {
		return 0
	}
	return g.life.warmUntil
}

// notServingErr is Offer's rejection while the engine does not serve.
func (g *Gateway) notServingErr() error {
	return fmt.Errorf("%w: backend %d's engine is not serving yet (loading: health failing or no model listed)", ErrOverloaded, g.backend)
}

// loadingSignals is a report in state Loading: the last one, or an empty one.
func (g *Gateway) loadingSignals() *telemetry.Signals { return g.notAdmitting() }
