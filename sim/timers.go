package sim

// timerSet holds at most one pending event per entity (a worker's next step
// end, a gateway's next stats message, a router's next deadline). Its events
// wait in the event queue, in the same order as every other event; moving an
// entity's event leaves the old slot in the queue, which drops it when it
// comes to the front (its key is no longer the entity's), and removing one
// only forgets its key. (The entity's pending event is kept apart too, for
// pending: its node may be far away in the slab.) A pending timer costs one
// push and one pop, as an event does, where an indexed heap of timers sifted
// on every move. A moved timer's old node stays in the queue until its time:
// memory and a pop, not a change of order.
type timerSet struct {
	q *eventQueue // holds the entities' events and keys
}

// grow adds n entities and returns the id of the first.
func (t *timerSet) grow(n int) int {
	q := t.q
	base := len(q.tev)
	for range n {
		q.tev = append(q.tev, event{})
		q.tkey = append(q.tkey, 0)
	}
	return base
}

func (t *timerSet) pending(id int) (at event, ok bool) {
	q := t.q
	if q.tkey[id] == 0 {
		return event{}, false
	}
	return q.tev[id], true
}

// set makes e, freshly stamped, the entity's pending event.
func (t *timerSet) set(id int, e event) {
	q := t.q
	if q.tkey[id] == 0 {
		q.live++
	}
	q.tev[id] = e
	q.tkey[id] = e.key
	q.insert(e, int32(id)+1)
}

// remove forgets the entity's pending event, if any.
func (t *timerSet) remove(id int) {
	q := t.q
	if q.tkey[id] != 0 {
		q.tkey[id] = 0
		q.live--
	}
}
