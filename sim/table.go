package sim

// table maps ids handed out in increasing order to live values. Lookups are
// slice indexing, not hashing; the dead prefix is dropped as it grows, so
// memory follows the number of live ids, not every id ever issued.
type table[T any] struct {
	base  uint64 // id of items[0]
	items []*T
	dead  int // items[:dead] are all nil
}

func (t *table[T]) get(id uint64) *T {
	if id < t.base || id-t.base >= uint64(len(t.items)) {
		return nil
	}
	return t.items[id-t.base]
}

// put stores v under id, which must not be below any id stored before.
func (t *table[T]) put(id uint64, v *T) {
	if len(t.items) == 0 {
		t.base, t.dead = id, 0
	}
	for id-t.base >= uint64(len(t.items)) {
		t.items = append(t.items, nil)
	}
	t.items[id-t.base] = v
}

// each calls f for every live value, in id order.
func (t *table[T]) each(f func(*T)) {
	for _, v := range t.items[t.dead:] {
		if v != nil {
			f(v)
		}
	}
}

func (t *table[T]) del(id uint64) {
	if id < t.base || id-t.base >= uint64(len(t.items)) {
		return
	}
	t.items[id-t.base] = nil
	for t.dead < len(t.items) && t.items[t.dead] == nil {
		t.dead++
	}
	if t.dead > 1024 && 2*t.dead > len(t.items) {
		n := copy(t.items, t.items[t.dead:])
		clear(t.items[n:])
		t.items = t.items[:n]
		t.base += uint64(t.dead)
		t.dead = 0
	}
}
