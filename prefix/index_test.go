package prefix

import (
	"math/rand/v2"
	"testing"
	"time"
)

type op struct {
	insert  bool
	backend ID
	blocks  []uint64
	at      time.Duration
}

func TestIndexMatch(t *testing.T) {
	tests := []struct {
		name   string
		caps   []int
		maxAge time.Duration
		ops    []op
		query  []uint64
		at     time.Duration
		want   []int32
		best   int
	}{
		{name: "empty", caps: []int{4, 4}, query: []uint64{1, 2}, want: []int32{0, 0}},
		{name: "longest per backend", caps: []int{8, 8},
			ops:   []op{{true, 0, []uint64{1, 2, 3}, 0}, {true, 1, []uint64{1, 2, 9}, 0}},
			query: []uint64{1, 2, 3, 4}, want: []int32{3, 2}, best: 3},
		{name: "a gap stops the match", caps: []int{8},
			ops:   []op{{true, 0, []uint64{1, 3}, 0}},
			query: []uint64{1, 2, 3}, want: []int32{1}, best: 1},
		{name: "first block missing", caps: []int{8},
			ops:   []op{{true, 0, []uint64{2, 3}, 0}},
			query: []uint64{1, 2, 3}, want: []int32{0}},
		{name: "LRU evicts the tail of the oldest chain", caps: []int{3},
			ops:   []op{{true, 0, []uint64{1, 2, 3}, 0}, {true, 0, []uint64{7}, 1}},
			query: []uint64{1, 2, 3}, want: []int32{2}, best: 2},
		{name: "touching keeps a chain", caps: []int{4},
			ops: []op{{true, 0, []uint64{1, 2}, 0}, {true, 0, []uint64{5, 6}, 1},
				{true, 0, []uint64{1, 2}, 2}, {true, 0, []uint64{8, 9}, 3}},
			query: []uint64{1, 2}, want: []int32{2}, best: 2},
		{name: "prompt longer than capacity keeps its head", caps: []int{2},
			ops:   []op{{true, 0, []uint64{1, 2, 3, 4}, 0}},
			query: []uint64{1, 2, 3, 4}, want: []int32{2}, best: 2},
		{name: "max age forgets", caps: []int{8, 8}, maxAge: time.Second,
			ops:   []op{{true, 0, []uint64{1, 2}, 0}, {true, 1, []uint64{1}, 2 * time.Second}},
			query: []uint64{1, 2}, at: 2500 * time.Millisecond, want: []int32{0, 1}, best: 1},
		{name: "removed backend holds nothing", caps: []int{8, 8},
			ops:   []op{{true, 0, []uint64{1, 2}, 0}, {true, 1, []uint64{1, 2}, 0}, {false, 0, nil, 0}},
			query: []uint64{1, 2}, want: []int32{0, 2}, best: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := New(tc.maxAge)
			for _, c := range tc.caps {
				if _, err := x.Add(c); err != nil {
					t.Fatal(err)
				}
			}
			for _, o := range tc.ops {
				if o.insert {
					x.Insert(o.backend, o.blocks, o.at)
				} else {
					x.Remove(o.backend)
				}
			}
			got, best := x.Match(tc.query, tc.at, nil)
			if best != tc.best || len(got) != len(tc.want) {
				t.Fatalf("Match = %v, %d; want %v, %d", got, best, tc.want, tc.best)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Match = %v; want %v", got, tc.want)
				}
			}
		})
	}
}

func TestIndexBoundedMemory(t *testing.T) {
	x := New(0)
	caps := []int{50, 100, 7}
	for _, c := range caps {
		if _, err := x.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		b := ID(rng.IntN(len(caps)))
		n := 1 + rng.IntN(30)
		blocks := make([]uint64, n)
		for k := range blocks {
			blocks[k] = uint64(rng.IntN(400))
		}
		x.Insert(b, blocks, time.Duration(i))
		for id, c := range caps {
			if l := x.Len(ID(id)); l > c {
				t.Fatalf("backend %d holds %d blocks, capacity %d", id, l, c)
			}
		}
	}
	total := 0
	for id, c := range caps {
		total += c
		if got := x.Len(ID(id)); got != c {
			t.Errorf("backend %d holds %d blocks after 5000 prompts, want it full at %d", id, got, c)
		}
	}
	if len(x.nodes) > total {
		t.Errorf("%d nodes allocated for a total capacity of %d", len(x.nodes), total)
	}
	// Every node reachable by hash belongs to a live backend's list.
	held := 0
	for _, k := range x.byHash {
		for ; k != nilNode; k = x.nodes[k].sameNext {
			held++
		}
	}
	if held != total {
		t.Errorf("hash chains hold %d nodes, backends %d", held, total)
	}
	// Shrinking evicts down to the new capacity; removing frees everything.
	if err := x.SetCapacity(1, 10); err != nil || x.Len(1) != 10 {
		t.Fatalf("SetCapacity(1, 10): err %v, len %d", err, x.Len(1))
	}
	for id := range caps {
		x.Remove(ID(id))
	}
	if x.Blocks() != 0 {
		t.Errorf("%d blocks indexed after every backend left", x.Blocks())
	}
	if id, err := x.Add(3); err != nil || id < 0 || int(id) >= len(caps) {
		t.Errorf("Add after Remove = %d, %v; want a reused ID below %d", id, err, len(caps))
	}
}

func TestIndexBadInput(t *testing.T) {
	x := New(0)
	if _, err := x.Add(0); err == nil {
		t.Error("Add(0) accepted a backend that holds nothing")
	}
	if err := x.SetCapacity(3, 5); err == nil {
		t.Error("SetCapacity on an unknown backend succeeded")
	}
	id, _ := x.Add(1)
	if err := x.SetCapacity(id, -1); err == nil {
		t.Error("SetCapacity(-1) accepted")
	}
	x.Insert(42, []uint64{1}, 0) // unknown: ignored
	x.Remove(-1)
	if got, best := x.Match([]uint64{1}, 0, nil); best != 0 || got[0] != 0 {
		t.Errorf("Match after inserts to unknown backends = %v, %d", got, best)
	}
}

func TestChunker(t *testing.T) {
	a := HashText("system prompt that is long enough to fill blocks|question one", 8)
	b := HashText("system prompt that is long enough to fill blocks|another question", 8)
	if len(a) != 61/8 || len(b) != 66/8 {
		t.Fatalf("got %d and %d blocks, want %d and %d (whole chunks only)", len(a), len(b), 61/8, 66/8)
	}
	shared := 0
	for shared < min(len(a), len(b)) && a[shared] == b[shared] {
		shared++
	}
	if shared != 49/8 { // the 49 common bytes make 6 whole chunks
		t.Errorf("prompts share %d blocks, want %d", shared, 49/8)
	}
	// Same text cut in pieces hashes the same; chaining makes a block's hash
	// depend on its whole prefix.
	c := NewChunker(8)
	c.WriteString("system prompt that is long")
	c.WriteString(" enough to fill blocks|question one")
	if got := c.Blocks(); len(got) != len(a) || got[len(got)-1] != a[len(a)-1] {
		t.Errorf("pieces hash to %v, whole text to %v", got, a)
	}
	d := HashText("XXXXXXXXsystem p", 8)
	e := HashText("YYYYYYYYsystem p", 8)
	if d[1] == e[1] {
		t.Error("equal chunks after different prefixes hash the same: the chain is broken")
	}
	c.Reset()
	if len(c.Blocks()) != 0 {
		t.Error("Reset kept blocks")
	}
	if got := HashText("abc", 0); len(got) != 0 {
		t.Errorf("3 bytes made %d blocks of the default %d", len(got), ChunkChars)
	}
}

// TestMatchAtLeastAgrees: on chained prompts (each block's id names its
// prefix: here, a path in a tree of conversations), MatchAtLeast gives
// Match's answers at and above its minimum, through evictions and aging.
func TestMatchAtLeastAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := New(50 * time.Millisecond)
	for _, c := range []int{40, 90, 25, 60} {
		if _, err := x.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	// child[parent*64+branch] is a block id; the prefix of a prompt is the
	// path of branches it takes.
	next := uint64(1)
	child := map[uint64]uint64{}
	prompt := func() []uint64 {
		var out []uint64
		parent := uint64(0)
		for range 1 + rng.IntN(30) {
			key := parent*64 + uint64(rng.IntN(3))
			id, ok := child[key]
			if !ok {
				id, next = next, next+1
				child[key] = id
			}
			out = append(out, id)
			parent = id
		}
		return out
	}
	var a, b []int32
	matched := 0
	for i := range 4000 {
		now := time.Duration(i) * time.Millisecond
		p := prompt()
		if rng.IntN(2) == 0 {
			x.Insert(ID(rng.IntN(4)), p, now)
			continue
		}
		minLen := rng.IntN(len(p) + 1)
		var bestA, bestB int
		a, bestA = x.Match(p, now, a)
		b, bestB = x.MatchAtLeast(p, minLen, now, b)
		wantBest := 0
		for id := range a {
			want := a[id]
			if int(want) < max(minLen, 1) {
				want = 0
			}
			wantBest = max(wantBest, int(want))
			if b[id] != want {
				t.Fatalf("step %d, min %d: backend %d: MatchAtLeast %d, Match %d", i, minLen, id, b[id], a[id])
			}
		}
		if bestB != wantBest || (wantBest > 0 && bestA < wantBest) {
			t.Fatalf("step %d: best %d, want %d (Match's %d)", i, bestB, wantBest, bestA)
		}
		if wantBest > 1 {
			matched++
		}
	}
	if matched < 200 {
		t.Errorf("only %d queries matched more than one block: the test exercises little", matched)
	}
}

// TestBudgetBoundsEveryBackendTogether: backends claiming far more than the
// budget hold no more than it together; once it is spent a backend swaps its
// own blocks, and one holding none takes none.
func TestBudgetBoundsEveryBackendTogether(t *testing.T) {
	x := New(0)
	x.SetBudget(100)
	a, _ := x.Add(1 << 30)
	b, _ := x.Add(1 << 30)
	c, _ := x.Add(1 << 30)
	for i := range 50 {
		x.Insert(a, []uint64{uint64(1000 + 3*i), uint64(1001 + 3*i), uint64(1002 + 3*i)}, 0)
		x.Insert(b, []uint64{uint64(9000 + i)}, 0)
	}
	if got := x.Len(a) + x.Len(b); got != 100 {
		t.Fatalf("a and b hold %d blocks, want the budget of 100", got)
	}
	lenA := x.Len(a)
	x.Insert(a, []uint64{77, 78}, 1)
	if x.Len(a) != lenA || x.Len(a)+x.Len(b) != 100 {
		t.Fatalf("after the budget a holds %d (was %d), a+b %d: want a swapping its own blocks", x.Len(a), lenA, x.Len(a)+x.Len(b))
	}
	if _, n := x.Match([]uint64{77, 78}, 1, nil); n != 2 {
		t.Fatalf("a's newest prompt matches %d blocks, want 2", n)
	}
	x.Insert(c, []uint64{5, 6}, 1)
	if x.Len(c) != 0 {
		t.Fatalf("c took %d blocks from a spent budget", x.Len(c))
	}
	x.Remove(b)
	x.Insert(c, []uint64{5, 6}, 2)
	if x.Len(c) != 2 {
		t.Fatalf("c holds %d blocks after b left room, want 2", x.Len(c))
	}
}
