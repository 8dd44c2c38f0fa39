package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWaWRingStart: the bucketed search finds, for any hash, the point a
// binary search over the whole ring finds (the first whose hash is >= it),
// for rings of every size from none to thousands of points, at the ring's
// own hashes (ties), just beside them and at random.
func TestWaWRingStart(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 2, 3, 7, 20, 200} {
		for _, vnodes := range []int{0, 1, 3, 150} {
			backends := make([]Backend, n)
			for i := range backends {
				name := fmt.Sprintf("b%d", i)
				backends[i] = Backend{Name: name, Key: KeyOf(name)}
			}
			w := NewWaW(Params{VirtualNodes: vnodes}, backends)
			want := func(h uint64) int {
				i, _ := slices.BinarySearchFunc(w.points, h, func(p ringPoint, h uint64) int {
					switch {
					case p.hash < h:
						return -1
					case p.hash > h:
						return 1
					}
					return 0
				})
				return i
			}
			probes := []uint64{0, 1, ^uint64(0), ^uint64(0) - 1, 1 << 63}
			for _, p := range w.points {
				probes = append(probes, p.hash, p.hash-1, p.hash+1)
			}
			for range 2000 {
				probes = append(probes, rng.Uint64())
			}
			for _, h := range probes {
				if got, w := w.ringStart(h), want(h); got != w {
					t.Fatalf("%d backends x %d points: ringStart(%#x) = %d, want %d", n, vnodes, h, got, w)
				}
			}
		}
	}
}
