package router

import (
	"testing"

	"github.com/stargate-llm/stargate/policy"
)

// Every policy places a request that names a pool only on that pool's
// backends, and one that names none anywhere; PoolCanTake says when a
// pool has no eligible backend left.
func TestPlacementByPool(t *testing.T) {
	for _, pol := range policy.NewRegistry().Names() {
		t.Run(pol, func(t *testing.T) {
			r := modelFleet(t, pol) // a (m1), b (m2), c (m1)
			r.SetPools(map[string]string{"a": "short", "b": "short", "c": "long"})
			for i := range 40 {
				for _, tc := range []struct {
					pool, model string
					want        map[string]bool
				}{
					{"short", "", map[string]bool{"a": true, "b": true}},
					{"long", "", map[string]bool{"c": true}},
					{"short", "m1", map[string]bool{"a": true}},
				} {
					d := r.Route(0, uint64(i), Ask{Session: uint64(i), Pool: tc.pool, Model: tc.model})
					if d.Kind != policy.Dispatch {
						continue // a policy may hold a request; it never breaks the pool
					}
					if name := r.names[d.Backend]; !tc.want[name] {
						t.Fatalf("pool %s model %q went to %s", tc.pool, tc.model, name)
					}
					r.Undispatch(d.Backend)
				}
			}
			if !r.PoolCanTake("short", "m2") || r.PoolCanTake("long", "m2") {
				t.Error("PoolCanTake: short serves m2 (b), long does not")
			}
			for _, n := range []string{"a", "b"} {
				id, _ := r.Lookup(n)
				r.SetEligible(id, false)
			}
			if r.PoolCanTake("short", "") || !r.PoolCanTake("long", "") || !r.PoolCanTake("", "") {
				t.Error("PoolCanTake: short has no eligible backend left, long and the whole fleet do")
			}
			if id, _ := r.Lookup("c"); !r.InPool(id, "long") || r.InPool(id, "short") || !r.InPool(id, "") {
				t.Errorf("InPool(c): want long only, of %v", r.pools.of)
			}
		})
	}
}
