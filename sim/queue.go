package sim

import "time"

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

// slot is an entry of a keyed heap: an order and what it orders (an index
// in the queue's slab of events, or a timer's entity). 24 bytes, half an
// event: the four children of a node span 96 bytes, where events spanned
// 192, and a sift moves a third of the bytes.
type slot struct {
	order
	i int32
}

// eventQueue is a 4-ary min-heap of orders whose events wait in a slab: the
// heap's sifts compare and move 24-byte slots and never touch an event, which
// is written once when pushed and read once when popped. Four children per
// node halve the depth of a binary heap, and the simulator pops as often as
// it pushes.
type eventQueue struct {
	heap []slot
	slab []event
	free []int32 // slab indices of popped events, for reuse
	seq  uint64
}

// stamp gives e its place among simultaneous events.
func (q *eventQueue) stamp(e *event) {
	q.seq++
	e.key = uint64(e.kind)<<56 | q.seq
}

func (q *eventQueue) push(e event) {
	q.stamp(&e)
	var at int32
	if n := len(q.free); n > 0 {
		at = q.free[n-1]
		q.free = q.free[:n-1]
		q.slab[at] = e
	} else {
		at = int32(len(q.slab))
		q.slab = append(q.slab, e)
	}
	s := slot{order: e.order(), i: at}
	q.heap = append(q.heap, s)
	i := len(q.heap) - 1
	for i > 0 { // move the hole up to s's place
		p := (i - 1) / 4
		if !s.before(q.heap[p].order) {
			break
		}
		q.heap[i] = q.heap[p]
		i = p
	}
	q.heap[i] = s
}

// head is the earliest event's order; the queue must not be empty.
func (q *eventQueue) head() order { return q.heap[0].order }

func (q *eventQueue) pop() event {
	top := q.heap[0].i
	last := len(q.heap) - 1
	siftDown(q.heap[:last], 0, q.heap[last], nil)
	q.heap = q.heap[:last]
	q.free = append(q.free, top)
	return q.slab[top]
}

// siftDown puts s at position i of heap h (free there) and moves it down
// to its place; pos, if not nil, follows each slot's index (by its i).
func siftDown(h []slot, i int, s slot, pos []int32) {
	n := len(h)
	if n == 0 {
		return
	}
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
		if pos != nil {
			pos[h[i].i] = int32(i)
		}
		i = m
	}
	h[i] = s
	if pos != nil {
		pos[s.i] = int32(i)
	}
}

func (q *eventQueue) len() int { return len(q.heap) }

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
