package sim

import (
	"math"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/router"
)

// arrival is a stats message's arrival at a region: when, and whose.
type arrival struct {
	at      time.Duration
	backend int32
}

// arrivals is a binary min-heap of arrivals by time: the stats messages on
// their way to one region, so that a region's routers find those that have
// arrived without a scan over every backend.
type arrivals []arrival

func (h *arrivals) push(a arrival) {
	*h = append(*h, a)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if q[p].at <= q[i].at {
			break
		}
		q[p], q[i] = q[i], q[p]
		i = p
	}
}

func (h *arrivals) pop() arrival {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		m, l := i, 2*i+1
		if l < last && q[l].at < q[m].at {
			m = l
		}
		if r := l + 1; r < last && q[r].at < q[m].at {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// inbox holds the arrivals of the stats messages on their way to one region.
// A message from a backend of region src to this one takes the pair's fixed
// latency, so without a fault's path delay the arrivals from one source
// region come in the order they were sent: each source region gets a FIFO,
// and an arrival that would break its FIFO's order (a path delay) goes to a
// heap instead. Finding what has arrived then costs a look at each FIFO's
// head and the heap's top, not a heap operation per message.
type inbox struct {
	fifos []fifo // by source region
	late  arrivals
}

// fifo is a queue of arrivals in time order.
type fifo struct {
	q    []arrival
	head int
}

func (in *inbox) push(src int, a arrival) {
	if src >= len(in.fifos) {
		in.fifos = append(in.fifos, make([]fifo, src+1-len(in.fifos))...)
	}
	f := &in.fifos[src]
	if n := len(f.q); n > f.head && f.q[n-1].at > a.at {
		in.late.push(a)
		return
	}
	f.q = append(f.q, a)
}

// arrived reports whether some message has arrived by now.
func (in *inbox) arrived(now time.Duration) bool {
	if len(in.late) > 0 && in.late[0].at <= now {
		return true
	}
	for i := range in.fifos {
		if f := &in.fifos[i]; f.head < len(f.q) && f.q[f.head].at <= now {
			return true
		}
	}
	return false
}

// due removes every arrival by now and appends its backend to out.
func (in *inbox) due(now time.Duration, out []int32) []int32 {
	for i := range in.fifos {
		f := &in.fifos[i]
		for f.head < len(f.q) && f.q[f.head].at <= now {
			out = append(out, f.q[f.head].backend)
			f.head++
		}
		if f.head == len(f.q) {
			f.q, f.head = f.q[:0], 0
		} else if f.head > 64 && 2*f.head > len(f.q) {
			f.q = f.q[:copy(f.q, f.q[f.head:])]
			f.head = 0
		}
	}
	for len(in.late) > 0 && in.late[0].at <= now {
		out = append(out, in.late.pop().backend)
	}
	return out
}

// inFlight is a stats message on its way to a region.
type inFlight struct {
	at time.Duration
	m  *message
}

// message is a stats message and the number of regions it has not yet
// reached (or been overtaken at): at zero nothing reads it any more, and the
// gateways write their next messages over it (gateway.TakeStatsInto) rather
// than allocating one per message. The stats and their per-router counts
// sit in the message itself (st is &inline unless a fleet has more routers
// than received holds), so that a delivery follows one pointer less, to
// memory next to the message's: at 100x the fleet a message was last read
// thousands of messages ago and each pointer is a cache miss.
type message struct {
	st       *gateway.Stats
	refs     int
	inline   gateway.Stats
	received [16]uint64
}

// takeStats is backend b's next stats message, on its way to every region
// with routers.
func (s *simulation) takeStats(b int) *message {
	var m *message
	if n := len(s.freeMsgs); n > 0 {
		m = s.freeMsgs[n-1]
		s.freeMsgs = s.freeMsgs[:n-1]
	} else {
		m = &message{}
		m.inline.Received = m.received[:0]
		m.st = &m.inline
	}
	m.st = s.backends[b].gw.TakeStatsInto(s.now, m.st)
	m.refs = len(s.regions)
	return m
}

// dropMessage drops one region's reference to m.
func (s *simulation) dropMessage(m *message) {
	if m.refs--; m.refs <= 0 {
		s.freeMsgs = append(s.freeMsgs, m)
	}
}

// channel holds a backend's stats messages on their way to one region, in
// arrival order.
type channel struct {
	q    []inFlight
	head int
}

// lastArrived is the latest message of the channel that has arrived by
// now, the one deliver applies; nil if none has.
func (ch *channel) lastArrived(now time.Duration) *message {
	var m *message
	for j := ch.head; j < len(ch.q) && ch.q[j].at <= now; j++ {
		m = ch.q[j].m
	}
	return m
}

// poolOf is backend b's pool and its ID in that pool's routers: 0 and b
// without pools, so that a fleet without them never reads its specs here.
func (s *simulation) poolOf(b int) (int, router.BackendID) {
	if len(s.cfg.Pools) == 0 {
		return 0, router.BackendID(b)
	}
	return s.cfg.Backends[b].Pool, router.BackendID(s.local[b])
}

// chanOf is backend b's channel to region.
func (s *simulation) chanOf(b, region int) *channel {
	return &s.channels[b*len(s.cfg.Regions)+region]
}

func (s *simulation) statsEmit(b int) {
	bs := s.backends[b]
	m := s.takeStats(b)
	if m.refs == 0 {
		s.dropMessage(m) // no region has routers
	}
	for _, region := range s.regions {
		at := s.now + s.cfg.Latency[bs.spec.Region][region] + s.pathDelay(b)
		ch := s.chanOf(b, region)
		if n := len(ch.q); n > ch.head && ch.q[n-1].at > at {
			at = ch.q[n-1].at // one stream: messages arrive in order
		}
		ch.q = append(ch.q, inFlight{at: at, m: m})
		s.inbound[region].push(bs.spec.Region, arrival{at: at, backend: int32(b)})
		if s.armed[region] {
			s.q.push(deliverEvent(at, b, region))
		}
	}
	s.markStats(b)
}

// deliver hands the routers of a region the latest stats of backend b that
// have arrived by now, if they have not seen it.
func (s *simulation) deliver(b, region int) {
	ch := s.chanOf(b, region)
	var last *message
	for ch.head < len(ch.q) && ch.q[ch.head].at <= s.now {
		if last != nil {
			s.dropMessage(last) // overtaken before it was read
		}
		last = ch.q[ch.head].m
		ch.q[ch.head] = inFlight{}
		ch.head++
	}
	if ch.head > 64 && 2*ch.head > len(ch.q) {
		ch.q = ch.q[:copy(ch.q, ch.q[ch.head:])]
		ch.head = 0
	}
	if last == nil {
		return
	}
	defer s.dropMessage(last)
	latest := last.st
	p, id := s.poolOf(b)
	if len(s.cfg.Pools) > 0 { // the pool's router knows the backend by its index in the pool
		local := *latest
		local.Backend = int(id)
		latest = &local
	}
	for _, ri := range s.byRegion[region] {
		s.outcomes = s.routers[ri].subs[p].OnStats(s.now, latest, s.outcomes[:0])
		s.applyOutcomes(p)
		s.scheduleRouterTimer(ri)
		s.markWeights(ri)
	}
}

// syncRegion brings a region's routers up to date before one of them reads
// its views: it delivers, in backend order, the latest message of every
// backend with messages that have arrived. The region's inbox names those
// backends (and some whose messages an armed region's events already
// delivered), so the cost follows the messages, not the fleet.
func (s *simulation) syncRegion(region int) {
	in := &s.inbound[region]
	if !in.arrived(s.now) {
		return // nothing has arrived
	}
	due := in.due(s.now, s.dueScratch[:0])
	slices.Sort(due)
	due = slices.Compact(due)
	if len(due) > 1 {
		s.prefetch(due, region)
	}
	for _, b := range due {
		if ch := s.chanOf(int(b), region); ch.head < len(ch.q) && ch.q[ch.head].at <= s.now {
			s.deliver(int(b), region)
		}
	}
	s.dueScratch = due
}

// prefetch reads, for every backend in due, what delivering its latest
// message to region will read first: the channel, the message, and each of
// the region's routers' state for the backend (router.Prefetch). Pass by
// pass the reads are independent of one another, so their cache misses
// overlap; delivering straight away would wait for them one at a time.
// It changes nothing; the sum it keeps only stops the reads being dropped.
func (s *simulation) prefetch(due []int32, region int) {
	var x uint64
	routers := s.byRegion[region]
	for _, b := range due {
		p, id := s.poolOf(int(b))
		x += uint64(s.chanOf(int(b), region).head)
		for _, ri := range routers {
			x += s.routers[ri].subs[p].Prefetch(id)
		}
	}
	for _, b := range due {
		if ch := s.chanOf(int(b), region); ch.head < len(ch.q) {
			x += uint64(ch.q[ch.head].at)
		}
	}
	for _, b := range due {
		if last := s.chanOf(int(b), region).lastArrived(s.now); last != nil {
			st := last.st // the message deliver applies: 272 bytes, five lines
			x += st.Seq + math.Float64bits(st.MaxInputTPS) + st.Cancelled
			for _, ri := range routers { // each router reads its own count
				if ri < len(st.Received) {
					x += st.Received[ri]
				}
			}
		}
	}
	s.prefetched += x
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
			ch := s.chanOf(b, region)
			for _, m := range ch.q[ch.head:] {
				s.q.push(deliverEvent(m.at, b, region))
			}
		}
	}
	s.armed[region] = waiting
}
