package sim

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
