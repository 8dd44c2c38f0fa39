package sim

import "time"

// eventQueue is a 4-ary min-heap ordered by (time, kind, sequence number), so
// the order of simultaneous events is fixed and runs are reproducible. Four
// children per node halve the depth of a binary heap, and the simulator pops
// as often as it pushes.
type eventQueue struct {
	items []event
	seq   uint64
}

// stamp gives e its place among simultaneous events.
func (q *eventQueue) stamp(e *event) {
	q.seq++
	e.key = uint64(e.kind)<<56 | q.seq
}

func (q *eventQueue) push(e event) {
	q.stamp(&e)
	q.items = append(q.items, e)
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !q.items[i].less(&q.items[p]) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

func (q *eventQueue) pop() event {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items[last] = event{}
	q.items = q.items[:last]
	n := len(q.items)
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+4 && k < n; k++ {
			if q.items[k].less(&q.items[m]) {
				m = k
			}
		}
		if !q.items[m].less(&q.items[i]) {
			break
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return top
}

func (q *eventQueue) len() int { return len(q.items) }

// deadline is an attempt's timeout event as the FIFO of deadlines keeps it:
// its place in the order and its attempt (kind evAttemptTimeout).
type deadline struct {
	at  time.Duration
	key uint64
	id  uint64
}

// before reports whether the deadline comes before e in the event order.
func (d *deadline) before(e *event) bool {
	return d.at < e.at || (d.at == e.at && d.key < e.key)
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
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = deadline{at: e.at, key: e.key, id: e.id}
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
