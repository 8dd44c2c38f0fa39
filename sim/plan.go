package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/stargate-llm/stargate/workload"
)

// PlannedSession is one session of a run's Poisson session stream: when it
// arrives, its id (also its session key in the simulator), its region and
// router (an index into the routers listed region by region, as
// Config.Regions gives their counts) and its turns.
type PlannedSession struct {
	At      time.Duration
	ID      uint64
	Region  int
	Router  int
	Session *workload.Session
}

// SessionPlan replays the session stream a simulator run of the same
// configuration draws (its arrival instants, session seeds and the region
// and router of each session), so that a live driver can play exactly the
// sessions its simulated twin plays. Only the default arrival mode (Poisson
// sessions at Config.RPS) has a plan.
type SessionPlan struct {
	wl       workload.Config
	rng      *rand.Rand
	arrivals *workload.Arrivals
	seed     uint64
	regions  []int
	byRegion [][]int
	next     time.Duration
	id       uint64
}

// NewSessionPlan returns the session stream of cfg.
func NewSessionPlan(cfg Config) (*SessionPlan, error) {
	if cfg.Requests != nil || cfg.Class != nil || cfg.Clients > 0 {
		return nil, errors.New("sim: a session plan needs Poisson sessions (no trace, class or closed loop)")
	}
	p := &SessionPlan{wl: cfg.Workload, rng: rand.New(rand.NewPCG(subSeed(cfg.Seed, streamArrivals), 0)),
		seed: subSeed(cfg.Seed, streamSessions), byRegion: make([][]int, len(cfg.Regions))}
	idx := 0
	for ri, region := range cfg.Regions {
		for range region.Routers {
			p.byRegion[ri] = append(p.byRegion[ri], idx)
			idx++
		}
		if region.Routers > 0 {
			p.regions = append(p.regions, ri)
		}
	}
	if len(p.regions) == 0 {
		return nil, errors.New("sim: a session plan needs a region with a router")
	}
	arr, err := workload.NewArrivals(cfg.Workload.SessionRate(cfg.RPS), p.rng)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	p.arrivals = arr
	p.next = arr.Next(0)
	return p, nil
}

// Next returns the next session, in arrival order. The draws are those of
// the simulator's poissonSessions and newSession, in the same order.
func (p *SessionPlan) Next() PlannedSession {
	p.id++
	region := p.regions[p.rng.IntN(len(p.regions))]
	rs := p.byRegion[region]
	ps := PlannedSession{At: p.next, ID: p.id, Region: region, Router: rs[p.rng.IntN(len(rs))],
		Session: p.wl.NewSession(p.seed, p.id)}
	p.next = p.arrivals.Next(p.next)
	return ps
}
