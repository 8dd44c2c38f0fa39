package sim

// The event heap and indexed timer heap the calendar queue replaced, kept
// as the reference that TestQueueMatchesHeap compares it with.

type refSlot struct {
	order
	i int32
}

// refQueue is a 4-ary min-heap of orders whose events wait in a slab: the
// heap's sifts compare and move 24-byte slots and never touch an event, which
// is written once when pushed and read once when popped. Four children per
// node halve the depth of a binary heap, and the simulator pops as often as
// it pushes.
type refQueue struct {
	heap []refSlot
	slab []event
	free []int32 // slab indices of popped events, for reuse
}

func (q *refQueue) push(e event) {
	var at int32
	if n := len(q.free); n > 0 {
		at = q.free[n-1]
		q.free = q.free[:n-1]
		q.slab[at] = e
	} else {
		at = int32(len(q.slab))
		q.slab = append(q.slab, e)
	}
	s := refSlot{order: e.order(), i: at}
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
func (q *refQueue) head() order { return q.heap[0].order }

func (q *refQueue) pop() event {
	top := q.heap[0].i
	last := len(q.heap) - 1
	refSiftDown(q.heap[:last], 0, q.heap[last], nil)
	q.heap = q.heap[:last]
	q.free = append(q.free, top)
	return q.slab[top]
}

// refSiftDown puts s at position i of heap h (free there) and moves it down
// to its place; pos, if not nil, follows each slot's index (by its i).
func refSiftDown(h []refSlot, i int, s refSlot, pos []int32) {
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

func (q *refQueue) len() int { return len(q.heap) }

// refTimers holds at most one pending event per entity (a worker's next step
// end, a gateway's next stats message, a router's next deadline) in an indexed
// 4-ary heap with the same order as the event queue. Moving an entity's event
// replaces it in place, where the plain queue would keep the old one as a
// stale entry to pop and ignore. The heap holds each entity's order (slot.i is
// the entity), so a sift never reads the entities' events.
type refTimers struct {
	ev   []event // by entity: its pending event, if pos >= 0
	pos  []int32 // by entity: index in heap, or -1
	heap []refSlot
}

// grow adds n entities and returns the id of the first.
func (t *refTimers) grow(n int) int {
	base := len(t.ev)
	for range n {
		t.ev = append(t.ev, event{})
		t.pos = append(t.pos, -1)
	}
	return base
}

func (t *refTimers) pending(id int) (at event, ok bool) {
	if t.pos[id] < 0 {
		return event{}, false
	}
	return t.ev[id], true
}

// set makes e (already stamped) the entity's pending event.
func (t *refTimers) set(id int, e event) {
	t.ev[id] = e
	s := refSlot{order: e.order(), i: int32(id)}
	i := int(t.pos[id])
	if i < 0 {
		i = len(t.heap)
		t.heap = append(t.heap, s)
	}
	t.place(i, s)
}

func (t *refTimers) len() int { return len(t.heap) }

// head is the earliest pending event's order; the set must not be empty.
func (t *refTimers) head() order { return t.heap[0].order }

// pop removes and returns the earliest pending event.
func (t *refTimers) pop() event {
	id := t.heap[0].i
	t.remove(int(id))
	return t.ev[id]
}

func (t *refTimers) remove(id int) {
	i := int(t.pos[id])
	if i < 0 {
		return
	}
	t.pos[id] = -1
	last := len(t.heap) - 1
	s := t.heap[last]
	t.heap = t.heap[:last]
	if i < last {
		t.place(i, s)
	}
}

// place puts s at heap index i (whose slot is free) and moves it up or down
// to its place, keeping pos current.
func (t *refTimers) place(i int, s refSlot) {
	h := t.heap
	for i > 0 { // up
		p := (i - 1) / 4
		if !s.before(h[p].order) {
			break
		}
		h[i] = h[p]
		t.pos[h[i].i] = int32(i)
		i = p
	}
	refSiftDown(h, i, s, t.pos)
}
