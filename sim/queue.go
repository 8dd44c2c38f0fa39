package sim

import (
	"math/bits"
	"slices"
	"time"
)

// order is an event's place in the run: its instant, then its key (kind in
// the top byte, then the sequence number of its stamp). Two orders are never
// equal, so the order of simultaneous events is fixed and runs are
// reproducible.
type order struct {
	at  time.Duration
	key uint64
}

func (o order) before(p order) bool {
	return o.at < p.at || (o.at == p.at && o.key < p.key)
}

func (e *event) order() order { return order{at: e.at, key: e.key} }

// slot is an entry of near, late and far: an order and what it orders (an index
// in the queue's slab). 24 bytes, half an event: sorting and sifting move
// slots and never touch an event.
type slot struct {
	order
	i int32
}

// node is an event in the queue's slab and, for a timer's event, its
// entity: 64 bytes, so that a node is one cache line of the slab (a large
// allocation, so aligned) and reading its order brings in the rest.
type node struct {
	e     event
	timer int32 // the timer's entity + 1, 0 for a plain event
	_     [12]byte
}

// The queue's buckets: a bucket holds the events of 2^bucketShift ns (about
// half a millisecond), and the ring of bucketCount buckets the next 4.3 s.
const (
	bucketShift = 19
	bucketCount = 1 << 13
	bucketMask  = bucketCount - 1
)

// eventQueue is a calendar queue: events in the current bucket's time span
// or earlier wait in near, sorted (or in late, a 4-ary heap, if filed after
// near was sorted); the next 4.3 s in a ring of buckets, each
// an unsorted array of slab indices; the rest in a 4-ary heap (far). A push
// writes the event to a slab node (most often one just freed, still in
// cache) and appends 4 bytes to its bucket: two cache lines, where a heap of all
// pending events (5,500 at 10x, 55,000 at 100x) made every pop walk six to
// eight levels of 96-byte rows spread over the whole heap, most of them
// cache misses at those sizes. A bucket is sorted once, when the run
// reaches it, and a pop takes near's last slot or late's top, whichever is
// earlier. (Buckets as lists linked
// through the slab cost more: reading a bucket chased one cache miss after
// another, where an array lets the reads of its nodes overlap.)
//
// The order is exact: near and late hold every event of a bucket before
// cur, the ring those of buckets cur to cur+bucketCount-1, far the later
// ones, near is sorted by (time, key) and late is a heap by it, so events
// pop in (time, key) order as from one heap, whatever the bucket width.
//
// The queue also holds the timers' events (timerSet): a timer's node names
// its entity, and a node whose key is no longer the entity's pending key
// (moved or removed since) is dropped when it reaches the front.
type eventQueue struct {
	near   []slot                   // bucket < cur, sorted; latest first, so a pop takes the last
	late   []slot                   // 4-ary min-heap: bucket < cur, filed after near was sorted
	ring   [][]int32                // by bucket & bucketMask: its nodes
	full   [bucketCount / 64]uint64 // bit b: bucket b is not empty
	inRing int
	cur    int64  // the first bucket not in near
	far    []slot // 4-ary min-heap: bucket >= cur+bucketCount
	slab   []node
	free   []int32 // slab indices of popped events, for reuse
	seq    uint64
	live   int // events and pending timers held (stale timer nodes not counted)

	// By timer entity: its pending event, and that event's key (0: none;
	// keys start at 1).
	tev  []event
	tkey []uint64
}

// stamp gives e its place among simultaneous events.
func (q *eventQueue) stamp(e *event) {
	q.seq++
	e.key = uint64(e.kind)<<56 | q.seq
}

func (q *eventQueue) push(e event) {
	q.stamp(&e)
	q.live++
	q.insert(e, 0)
}

// insert stores e (stamped) in a slab node and files it by its bucket in
// late (a bucket already sorted into near: e is due within half a
// millisecond), the ring or far. late is a heap, so that k events due at
// one instant cost k log k; inserting each in near would move the slots
// after it, k^2.
func (q *eventQueue) insert(e event, timer int32) {
	var i int32
	if n := len(q.free); n > 0 {
		i = q.free[n-1]
		q.free = q.free[:n-1]
	} else {
		i = int32(len(q.slab))
		q.slab = append(q.slab, node{})
	}
	nd := &q.slab[i]
	nd.e, nd.timer = e, timer
	b := bucketOf(e.at)
	switch {
	case b < q.cur:
		heapPush(&q.late, slot{order: e.order(), i: i})
	case b < q.cur+bucketCount:
		q.link(b, i)
	default:
		heapPush(&q.far, slot{order: e.order(), i: i})
	}
}

// heapPush adds s to 4-ary min-heap h.
func heapPush(h *[]slot, s slot) {
	*h = append(*h, s)
	q := *h
	j := len(q) - 1
	for j > 0 { // move the hole up to s's place
		p := (j - 1) / 4
		if !s.before(q[p].order) {
			break
		}
		q[j] = q[p]
		j = p
	}
	q[j] = s
}

// heapPop removes the top of 4-ary min-heap h, which must not be empty.
func heapPop(h *[]slot) {
	q := *h
	last := len(q) - 1
	siftDown(q[:last], 0, q[last])
	*h = q[:last]
}

// link adds node i to bucket b.
func (q *eventQueue) link(b int64, i int32) {
	if q.ring == nil {
		q.ring = make([][]int32, bucketCount)
	}
	r := b & bucketMask
	q.ring[r] = append(q.ring[r], i)
	q.full[r>>6] |= 1 << (r & 63)
	q.inRing++
}

func bucketOf(at time.Duration) int64 { return int64(at) >> bucketShift }

// settle finds the earliest pending event, near's last slot or late's top
// (fromLate), dropping stale timer nodes and refilling near from the next
// bucket when both are empty (late's events are all due before the ring's);
// ok is false if the queue holds no pending event.
func (q *eventQueue) settle() (s slot, fromLate, ok bool) {
	for {
		n := len(q.near)
		switch {
		case n == 0 && len(q.late) == 0:
			if !q.refill() {
				return slot{}, false, false
			}
			continue
		case n == 0 || len(q.late) > 0 && q.late[0].before(q.near[n-1].order):
			s, fromLate = q.late[0], true
		default:
			s, fromLate = q.near[n-1], false
		}
		if t := q.slab[s.i].timer; t == 0 || q.tkey[t-1] == s.key {
			return s, fromLate, true
		}
		q.remove(fromLate) // a timer moved or removed since
		q.free = append(q.free, s.i)
	}
}

// remove takes the earliest slot off late (fromLate) or near.
func (q *eventQueue) remove(fromLate bool) {
	if fromLate {
		heapPop(&q.late)
	} else {
		q.near = q.near[:len(q.near)-1]
	}
}

// refill moves the earliest non-empty bucket into near (empty), sorted.
func (q *eventQueue) refill() bool {
	var b int64
	switch {
	case q.inRing > 0:
		b = q.cur + q.nextFull()
	case len(q.far) > 0:
		b = bucketOf(q.far[0].at) // the ring is empty: jump
	default:
		return false
	}
	q.cur = b
	q.migrate()
	r := b & bucketMask
	for _, i := range q.ring[r] {
		q.near = append(q.near, slot{order: q.slab[i].e.order(), i: i})
	}
	q.ring[r] = q.ring[r][:0]
	q.full[r>>6] &^= 1 << (r & 63)
	q.inRing -= len(q.near)
	q.cur = b + 1
	q.migrate()
	sortLatestFirst(q.near)
	return true
}

// nextFull is the distance from cur to the first non-empty bucket of the
// ring (which must hold one).
func (q *eventQueue) nextFull() int64 {
	r0 := q.cur & bucketMask
	w0 := int(r0 >> 6)
	if bits := q.full[w0] &^ (1<<(r0&63) - 1); bits != 0 {
		return int64(w0<<6+tz(bits)) - r0
	}
	for k := 1; k <= len(q.full); k++ {
		w := (w0 + k) % len(q.full)
		if bits := q.full[w]; bits != 0 {
			return (int64(w<<6+tz(bits)) - r0) & bucketMask
		}
	}
	return 0 // not reached: inRing > 0
}

func tz(x uint64) int { return bits.TrailingZeros64(x) }

// migrate moves far's events that the ring now spans into the ring.
func (q *eventQueue) migrate() {
	for len(q.far) > 0 && bucketOf(q.far[0].at) < q.cur+bucketCount {
		s := q.far[0]
		heapPop(&q.far)
		q.link(bucketOf(s.at), s.i)
	}
}

// sortLatestFirst sorts a bucket by order, latest first: insertion sort,
// as buckets are short (a few events at 1x, tens at 10x), then the
// library's sort for long ones.
func sortLatestFirst(h []slot) {
	if len(h) > 24 {
		slices.SortFunc(h, func(a, b slot) int {
			switch {
			case b.before(a.order):
				return -1
			case a.before(b.order):
				return 1
			}
			return 0 // orders are unique; never reached
		})
		return
	}
	for i := 1; i < len(h); i++ {
		s := h[i]
		j := i
		for j > 0 && h[j-1].before(s.order) {
			h[j] = h[j-1]
			j--
		}
		h[j] = s
	}
}

// front is the earliest event's slot and whether it is late's top; the
// queue must not be empty.
func (q *eventQueue) front() (slot, bool) {
	s, fromLate, ok := q.settle()
	if !ok {
		panic("sim: the event queue is empty") // the loop checks len first
	}
	return s, fromLate
}

// head is the earliest event's order; the queue must not be empty.
func (q *eventQueue) head() order {
	s, _ := q.front()
	return s.order
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event {
	s, fromLate := q.front()
	i := s.i
	q.remove(fromLate)
	q.live--
	q.free = append(q.free, i)
	nd := &q.slab[i]
	if nd.timer != 0 {
		q.tkey[nd.timer-1] = 0
	}
	return nd.e
}

// siftDown puts s at position i of 4-ary heap h (free there) and moves it
// down to its place.
func siftDown(h []slot, i int, s slot) {
	n := len(h)
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+4 && k < n; k++ {
			if h[k].before(h[m].order) {
				m = k
			}
		}
		if !h[m].before(s.order) {
			break
		}
		h[i] = h[m]
		i = m
	}
	if i < n {
		h[i] = s
	}
}

// len is the number of pending events, timers included.
func (q *eventQueue) len() int { return q.live }

// deadline is an attempt's timeout event as the FIFO of deadlines keeps it:
// its place in the order and its attempt (kind evAttemptTimeout).
type deadline struct {
	order
	id uint64
}

// deadlines is a FIFO of deadlines in a ring buffer (a power of two long):
// pushes and pops move nothing, and an entry is half an event's size.
type deadlines struct {
	buf     []deadline
	head, n int
}

func (d *deadlines) len() int { return d.n }

// push appends timeout (stamped, kind evAttemptTimeout).
func (d *deadlines) push(e event) {
	if d.n == len(d.buf) {
		grown := make([]deadline, max(2*len(d.buf), 1024))
		k := copy(grown, d.buf[d.head:])
		copy(grown[k:], d.buf[:d.head])
		d.buf, d.head = grown, 0
	}
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = deadline{order: e.order(), id: e.id}
	d.n++
}

// front is the earliest deadline; the FIFO must not be empty.
func (d *deadlines) front() *deadline { return &d.buf[d.head] }

// pop removes the earliest deadline and returns its event.
func (d *deadlines) pop() event {
	f := d.buf[d.head]
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.n--
	return event{at: f.at, key: f.key, id: f.id, kind: evAttemptTimeout}
}
