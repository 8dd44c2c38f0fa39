package router

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/internal/cputime"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// BenchmarkOnStatsFleet is one stats message delivered to each of 15 router
// replicas (5 regions of 3, as the simulator's hetero fleets have) over 200
// and 2,000 backends (the 10x and 100x fleets), from backends in a random
// order, nobody waiting: what the simulator's stats delivery costs in the
// router, where 15 routers' per-backend state is far larger than the
// caches and a message's backend was last touched thousands of messages
// ago. An op is one message to all 15.
func BenchmarkOnStatsFleet(b *testing.B) {
	const routers = 15
	for _, n := range []int{200, 2000} {
		for _, pol := range []string{"round-robin", "pulsar-waw", "waw"} {
			b.Run(fmt.Sprintf("backends=%d/%s", n, pol), func(b *testing.B) {
				bs := make([]policy.Backend, n)
				rb := make([]Backend, n)
				for i := range n {
					name := fmt.Sprintf("backend-%04d", i)
					bs[i] = policy.Backend{Name: name, Key: policy.KeyOf(name)}
					rb[i] = Backend{Name: name, Capacity: 8 + i%8}
				}
				rs := make([]*Router, routers)
				for k := range rs {
					p, err := policy.NewRegistry().New(pol, policy.DefaultParams(), bs, nil)
					if err != nil {
						b.Fatal(err)
					}
					if rs[k], err = NewWith(k, p, rb, Config{HeartbeatTTL: DefaultHeartbeatTTL}); err != nil {
						b.Fatal(err)
					}
				}
				msgs := make([]gateway.Stats, n)
				sigs := make([]telemetry.Signals, n)
				for i := range msgs {
					sigs[i] = telemetry.Signals{State: telemetry.Ready}
					msgs[i] = gateway.Stats{Backend: i, Capacity: rb[i].Capacity, Received: make([]uint64, routers), Signals: &sigs[i]}
				}
				rng := rand.New(rand.NewPCG(1, 2))
				order := rng.Perm(n)
				var out []Outcome
				seq := uint64(0)
				now := time.Duration(0)
				b.ReportAllocs()
				cpu := cputime.Used()
				for i := 0; b.Loop(); i++ {
					k := i % n
					if k == 0 {
						seq++
					}
					st := &msgs[order[k]]
					st.Seq = seq
					st.Active = int(seq+uint64(k)) % (st.Capacity + 1)
					st.Waiting = int(seq) % 3
					st.MaxInputTPS = float64(1000 + int(seq)%7)
					now += 10 * time.Millisecond / time.Duration(n)
					for _, r := range rs {
						out = r.OnStats(now, st, out[:0])
					}
				}
				b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
				if len(out) > 0 {
					b.Fatalf("%d outcomes with nobody waiting", len(out))
				}
			})
		}
	}
}
