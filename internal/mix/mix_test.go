package mix

import "testing"

func TestMix64(t *testing.T) {
	// The first outputs of splitmix64 seeded with 0 (each call mixes
	// 0x9e3779b97f4a7c15 more than the last), as the reference
	// implementation gives them.
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	state := uint64(0)
	for i, w := range want {
		if got := Mix64(state); got != w {
			t.Errorf("output %d = %#x, want %#x", i, got, w)
		}
		state += 0x9e3779b97f4a7c15
	}
	seen := map[uint64]bool{}
	for x := range uint64(1000) {
		seen[Mix64(x)] = true
	}
	if len(seen) != 1000 {
		t.Errorf("%d distinct outputs for 1000 inputs", len(seen))
	}
}
