package sim

// timerSet holds at most one pending event per entity (a worker's next step
// end, a gateway's next stats message, a router's next deadline) in an indexed
// 4-ary heap with the same order as the event queue. Moving an entity's event
// replaces it in place, where the plain queue would keep the old one as a
// stale entry to pop and ignore.
type timerSet struct {
	ev   []event // by entity: its pending event, if pos >= 0
	pos  []int   // by entity: index in heap, or -1
	heap []int   // entities
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
	if t.pos[id] < 0 {
		t.pos[id] = len(t.heap)
		t.heap = append(t.heap, id)
	}
	t.up(t.pos[id])
	t.down(t.pos[id])
}

func (t *timerSet) len() int { return len(t.heap) }

func (t *timerSet) top() *event { return &t.ev[t.heap[0]] }

// pop removes and returns the earliest pending event.
func (t *timerSet) pop() event {
	id := t.heap[0]
	t.remove(id)
	return t.ev[id]
}

func (t *timerSet) remove(id int) {
	i := t.pos[id]
	if i < 0 {
		return
	}
	last := len(t.heap) - 1
	t.swap(i, last)
	t.heap = t.heap[:last]
	t.pos[id] = -1
	if i < last {
		t.up(i)
		t.down(i)
	}
}

func (t *timerSet) less(i, j int) bool { return t.ev[t.heap[i]].less(&t.ev[t.heap[j]]) }

func (t *timerSet) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.pos[t.heap[i]], t.pos[t.heap[j]] = i, j
}

func (t *timerSet) up(i int) {
	for i > 0 {
		p := (i - 1) / 4
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *timerSet) down(i int) {
	n := len(t.heap)
	for {
		c := 4*i + 1
		if c >= n {
			return
		}
		m := c
		for k := c + 1; k < c+4 && k < n; k++ {
			if t.less(k, m) {
				m = k
			}
		}
		if !t.less(m, i) {
			return
		}
		t.swap(i, m)
		i = m
	}
}
