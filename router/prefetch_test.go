package router

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
)

// TestPrefetchChangesNothing feeds two routers of every policy the same
// stats and requests, one of them calling Prefetch before each message
// for the message's backend, a random one and IDs it does not know (which
// read 0), across the tree threshold: their views, lifecycles and picks
// must stay equal.
func TestPrefetchChangesNothing(t *testing.T) {
	reg := policy.NewRegistry()
	for _, name := range reg.Names() {
		for _, n := range []int{5, 300} {
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				mk := func() *Router {
					rb := make([]Backend, n)
					for i := range rb {
						rb[i] = Backend{Name: fmt.Sprint("b", i), Capacity: 4}
					}
					return routerFor(t, name, rb)
				}
				plain, warm := mk(), mk()
				rng := rand.New(rand.NewPCG(3, 4))
				seq := make([]uint64, n)
				for step := range 2000 {
					now := ms * (1 + time.Duration(step))
					if step%3 == 0 {
						s := rng.Uint64N(50)
						a, b := plain.route(now, uint64(step), s), warm.route(now, uint64(step), s)
						if a != b {
							t.Fatalf("step %d: pick %+v without Prefetch, %+v with", step, a, b)
						}
						continue
					}
					b := rng.IntN(n)
					seq[b]++
					st := gateway.Stats{Backend: b, Seq: seq[b], Capacity: 4, Active: rng.IntN(5), Waiting: rng.IntN(3),
						MaxInputTPS: float64(rng.IntN(3)) * 1000, Received: []uint64{uint64(step)}}
					warm.Prefetch(BackendID(b))
					warm.Prefetch(BackendID(rng.IntN(n)))
					for _, id := range []BackendID{BackendID(n), BackendID(n + 7), NoBackend} {
						if got := warm.Prefetch(id); got != 0 {
							t.Fatalf("Prefetch of unknown backend %d = %d, want 0", id, got)
						}
					}
					plain.OnStats(now, &st, nil)
					warm.OnStats(now, &st, nil)
				}
				if !slices.Equal(plain.views, warm.views) || !slices.Equal(plain.life, warm.life) {
					t.Fatal("views or lifecycles differ after Prefetch")
				}
			})
		}
	}
}
