package sim

import (
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/router"
)

// noMessage is a region's due time (see simulation.due) with no stats
// message on its way there.
const noMessage = time.Duration(1<<63 - 1)

// inFlight is a stats message on its way to a region.
type inFlight struct {
	at time.Duration
	st *gateway.Stats
}

// channel holds a backend's stats messages on their way to one region, in
// arrival order.
type channel struct {
	q    []inFlight
	head int
}

func (s *simulation) statsEmit(b int) {
	bs := s.backends[b]
	st := bs.gw.TakeStats(s.now)
	for _, region := range s.regions {
		at := s.now + s.cfg.Latency[bs.spec.Region][region] + s.pathDelay(b)
		ch := &s.channels[b][region]
		if n := len(ch.q); n > ch.head && ch.q[n-1].at > at {
			at = ch.q[n-1].at // one stream: messages arrive in order
		}
		ch.q = append(ch.q, inFlight{at: at, st: st})
		s.due[region] = min(s.due[region], at)
		if s.armed[region] {
			s.q.push(deliverEvent(at, b, region))
		}
	}
	s.markStats(b)
}

// deliver hands the routers of a region the latest stats of backend b that
// have arrived by now, if they have not seen it.
func (s *simulation) deliver(b, region int) {
	ch := &s.channels[b][region]
	var latest *gateway.Stats
	for ch.head < len(ch.q) && ch.q[ch.head].at <= s.now {
		latest = ch.q[ch.head].st
		ch.q[ch.head] = inFlight{}
		ch.head++
	}
	if ch.head > 64 && 2*ch.head > len(ch.q) {
		ch.q = ch.q[:copy(ch.q, ch.q[ch.head:])]
		ch.head = 0
	}
	if latest == nil {
		return
	}
	p := s.cfg.Backends[b].Pool
	if len(s.cfg.Pools) > 0 { // the pool's router knows the backend by its index in the pool
		local := *latest
		local.Backend = s.local[b]
		latest = &local
	}
	for _, ri := range s.byRegion[region] {
		if rs := s.routers[ri]; rs.refused != nil && rs.refused[b] {
			rs.refused[b] = false // it answers again
			rs.subs[p].SetEligible(router.BackendID(s.local[b]), true)
		}
		s.outcomes = s.routers[ri].subs[p].OnStats(s.now, latest, s.outcomes[:0])
		s.applyOutcomes(p)
		s.scheduleRouterTimer(ri)
		s.markWeights(ri)
	}
}

// syncRegion brings a region's routers up to date before one of them reads
// its views.
func (s *simulation) syncRegion(region int) {
	if s.due[region] > s.now {
		return // nothing has arrived: the scan below would deliver nothing
	}
	next := noMessage
	s.due[region] = next // a message sent while delivering lowers it again
	for b := range s.backends {
		ch := &s.channels[b][region]
		if ch.head < len(ch.q) && ch.q[ch.head].at <= s.now {
			s.deliver(b, region)
		}
		if ch.head < len(ch.q) {
			next = min(next, ch.q[ch.head].at)
		}
	}
	s.due[region] = min(s.due[region], next)
}

// updateArmed arms a region whose routers now hold waiting requests: every
// stats message on its way there gets an arrival event.
func (s *simulation) updateArmed(region int) {
	waiting := false
	for _, ri := range s.byRegion[region] {
		if s.routers[ri].waiting() > 0 {
			waiting = true
			break
		}
	}
	if waiting && !s.armed[region] {
		for b := range s.backends {
			ch := &s.channels[b][region]
			for _, m := range ch.q[ch.head:] {
				s.q.push(deliverEvent(m.at, b, region))
			}
		}
	}
	s.armed[region] = waiting
}
