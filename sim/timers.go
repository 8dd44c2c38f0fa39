package sim

// timerSet holds at most one pending event per entity (a worker's next step
// end, a gateway's next stats message, a router's next deadline) in an indexed
// 4-ary heap with the same order as the event queue. Moving an entity's event
// replaces it in place, where the plain queue would keep the old one as a
// stale entry to pop and ignore. The heap holds each entity's order (slot.i is
// the entity), so a sift never reads the entities' events.
type timerSet struct {
	ev   []event // by entity: its pending event, if pos >= 0
	pos  []int32 // by entity: index in heap, or -1
	heap []slot
}

// grow adds n entities and returns the id of the first.
func (t *timerSet) grow(n int) int {
	base := len(t.ev)
	for range n {
		t.ev = append(t.ev, event{})
		t.pos = append(t.pos, -1)
	}
	return base
}

func (t *timerSet) pending(id int) (at event, ok bool) {
	if t.pos[id] < 0 {
		return event{}, false
	}
	return t.ev[id], true
}

// set makes e (already stamped) the entity's pending event.
func (t *timerSet) set(id int, e event) {
	t.ev[id] = e
	s := slot{order: e.order(), i: int32(id)}
	i := int(t.pos[id])
	if i < 0 {
		i = len(t.heap)
		t.heap = append(t.heap, s)
	}
	t.place(i, s)
}

func (t *timerSet) len() int { return len(t.heap) }

// head is the earliest pending event's order; the set must not be empty.
func (t *timerSet) head() order { return t.heap[0].order }

// pop removes and returns the earliest pending event.
func (t *timerSet) pop() event {
	id := t.heap[0].i
	t.remove(int(id))
	return t.ev[id]
}

func (t *timerSet) remove(id int) {
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
func (t *timerSet) place(i int, s slot) {
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
	siftDown(h, i, s, t.pos)
}
