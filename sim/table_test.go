package sim

import "testing"

func TestTable(t *testing.T) {
	var tb table[int]
	vals := make([]int, 5000)
	for i := range vals {
		vals[i] = i
		tb.put(uint64(i+1), &vals[i])
	}
	// Delete all but every 1000th: the survivors stay reachable.
	for id := uint64(1); id <= 5000; id++ {
		if id%1000 != 0 {
			tb.del(id)
		}
	}
	for id := uint64(1); id <= 5000; id++ {
		got := tb.get(id)
		if (id%1000 == 0) != (got != nil) || (got != nil && *got != int(id-1)) {
			t.Fatalf("get(%d) = %v", id, got)
		}
	}
	// Once the early ids are gone too, the dead prefix is dropped.
	for id := uint64(1000); id < 5000; id += 1000 {
		tb.del(id)
	}
	if len(tb.items) > 1 || *tb.get(5000) != 4999 {
		t.Errorf("table keeps %d slots for 1 live id", len(tb.items))
	}
	if tb.get(0) != nil || tb.get(99999) != nil {
		t.Error("ids outside the table found something")
	}
	tb.del(99999) // no effect, no panic
}
