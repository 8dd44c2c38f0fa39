package plan

import (
	"errors"
	"math/bits"
	"testing"
)

// TestShrinkPool checks Verify's per-pool shrink against a monotone
// target (a fleet passes with at least k instances): it finds k, reports
// one fewer's miss only when one fewer missed, asks a small pool one
// count only, and a large one about 2 log2(n) counts, never one it asked.
func TestShrinkPool(t *testing.T) {
	for _, tc := range []struct{ n, k int }{
		{1, 1}, {2, 2}, {2, 1}, {8, 8}, {8, 7}, {8, 3}, {16, 1}, {17, 17}, {17, 16}, {17, 1},
		{100, 100}, {100, 99}, {100, 63}, {100, 1}, {1000, 524}, {1000, 2}, {5000, 4999}, {5000, 1234},
	} {
		asked := map[int]bool{}
		try := func(m int) (*Eval, error) {
			if m < 1 || m >= tc.n || asked[m] {
				t.Fatalf("n %d, k %d: asked %d (asked before: %v)", tc.n, tc.k, m, asked[m])
			}
			asked[m] = true
			return &Eval{Pass: m >= tc.k, Fleet: Fleet{Pools: []PoolSpec{{Instances: m}}}}, nil
		}
		start := &Eval{Pass: true}
		pass, e, missed, err := shrinkPool(tc.n, start, try)
		if err != nil {
			t.Fatal(err)
		}
		want := tc.k
		if tc.n <= gallopAbove && tc.k < tc.n-1 {
			want = tc.n - 1 // one step; Verify asks again
		}
		if pass != want {
			t.Errorf("n %d, k %d: shrank to %d, want %d", tc.n, tc.k, pass, want)
		}
		if pass == tc.n && e != start || pass < tc.n && e.Fleet.Pools[0].Instances != pass {
			t.Errorf("n %d, k %d: the Eval returned is not the fleet of %d", tc.n, tc.k, pass)
		}
		if oneFewerMissed := tc.k == tc.n && tc.n > 1; (missed != nil) != oneFewerMissed ||
			missed != nil && missed.Fleet.Pools[0].Instances != tc.n-1 {
			t.Errorf("n %d, k %d: missed %v, want one fewer's miss only when it missed", tc.n, tc.k, missed)
		}
		if limit := 2*bits.Len(uint(tc.n)) + 1; len(asked) > limit {
			t.Errorf("n %d, k %d: %d DES runs, want at most %d", tc.n, tc.k, len(asked), limit)
		}
	}
	boom := errors.New("boom")
	if _, _, _, err := shrinkPool(100, &Eval{Pass: true}, func(int) (*Eval, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("an error from a run: %v, want it returned", err)
	}
}
