package router

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/internal/cputime"
	"github.com/stargate-llm/stargate/policy"
)

// BenchmarkOnStats is one gateway stats message handled by a router replica
// of a 1,000-backend fleet under pulsar-waw: with no request waiting (the
// common case), and with 50 or 500 waiting at full backends, which a
// message from a backend with a free slot may ask again; with liveness off,
// and with the live router's heartbeat TTL.
func BenchmarkOnStats(b *testing.B) {
	const n = 1000
	for _, c := range []struct {
		waiting int
		ttl     time.Duration
	}{{0, 0}, {50, 0}, {500, 0}, {50, DefaultLiveHeartbeatTTL}} {
		waiting := c.waiting
		name := fmt.Sprintf("backends=%d/waiting=%d", n, waiting)
		if c.ttl > 0 {
			name += "/ttl=" + c.ttl.String()
		}
		b.Run(name, func(b *testing.B) {
			bs := make([]policy.Backend, n)
			rb := make([]Backend, n)
			for i := range n {
				name := fmt.Sprintf("backend-%04d", i)
				bs[i] = policy.Backend{Name: name, Key: policy.KeyOf(name)}
				rb[i] = Backend{Name: name, Capacity: 100}
			}
			p, err := policy.NewRegistry().New("pulsar-waw", policy.DefaultParams(), bs, nil)
			if err != nil {
				b.Fatal(err)
			}
			r, err := NewWith(0, p, rb, Config{HeartbeatTTL: c.ttl})
			if err != nil {
				b.Fatal(err)
			}
			full := make([]gateway.Stats, n)
			for i := range full {
				full[i] = gateway.Stats{Backend: i, Seq: 1, Capacity: 100, Active: 100, Received: []uint64{0}}
				r.OnStats(0, &full[i], nil)
			}
			// Sessions in turn until enough wait: one whose top backend
			// already holds MaxQueued waiting requests is refused (every
			// backend is full), and is not counted.
			for i := 0; r.Waiting() < waiting; i++ {
				switch d := r.Route(0, uint64(i+1), Ask{Session: uint64(i) * 0x9e3779b97f4a7c15}); {
				case d.Kind == policy.Dispatch:
					b.Fatalf("request %d dispatched, with every backend full", i)
				case i >= 4*waiting:
					b.Fatalf("%d of %d requests wait after %d sessions", r.Waiting(), waiting, i+1)
				}
			}
			// Every message shows a free slot at a backend no waiting request
			// ranks first: the router asks every waiting request again (each a
			// pick over all backends) and each waits on.
			tops := map[int]bool{}
			for _, v := range r.Views() {
				if v.Queued > 0 {
					tops[v.Index] = true
				}
			}
			var msgs []gateway.Stats
			for i := range full {
				if !tops[i] {
					st := full[i]
					st.Active = 99
					msgs = append(msgs, st)
				}
			}
			var out []Outcome
			seq := uint64(1)
			b.ReportAllocs()
			cpu := cputime.Used()
			for i := 0; b.Loop(); i++ {
				st := &msgs[i%len(msgs)]
				seq++
				st.Seq = seq
				out = r.OnStats(time.Millisecond, st, out[:0])
			}
			b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
			if r.Waiting() != waiting || len(out) > 0 {
				b.Fatalf("%d waiting after the messages, want %d", r.Waiting(), waiting)
			}
		})
	}
}

// BenchmarkRoute is one new request placed by a router replica at 1,000
// and 10,000 backends, for every policy, every backend full but one (as
// BenchmarkPick in package policy, but through the router: capability
// filter on, a model named, error rates tracked, the policy told of the
// dispatch, and for a request that waits, what the wait watches). The
// backend's next stats message then shows the request received and done,
// or the wait is cancelled, so every request sees the same fleet.
func BenchmarkRoute(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, name := range policy.NewRegistry().Names() {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				bs := make([]policy.Backend, n)
				rb := make([]Backend, n)
				for i := range n {
					bn := fmt.Sprintf("backend-%05d", i)
					bs[i] = policy.Backend{Name: bn, Key: policy.KeyOf(bn)}
					rb[i] = Backend{Name: bn, Capacity: 100, MaxModelLen: 32768, Models: []string{"model-a"}}
				}
				p, err := policy.NewRegistry().New(name, policy.DefaultParams(), bs, rand.New(rand.NewPCG(1, 2)))
				if err != nil {
					b.Fatal(err)
				}
				r, err := NewWith(0, p, rb, Config{Capability: true})
				if err != nil {
					b.Fatal(err)
				}
				stats := make([]gateway.Stats, n)
				for i := range stats {
					stats[i] = gateway.Stats{Backend: i, Seq: 1, Capacity: 100, Active: 100, MaxInputTPS: float64(1000 + i), Received: []uint64{0}}
					if i == n/2 {
						stats[i].Active = 0
					}
					r.OnStats(0, &stats[i], nil)
					r.OnResult(0, BackendID(i), Result{Kind: Succeeded})
				}
				b.ReportAllocs()
				cpu := cputime.Used()
				for i := 0; b.Loop(); i++ {
					q := Ask{Session: uint64(i), Tokens: 2000, Model: "model-a"}
					d := r.Route(time.Second, uint64(i), q)
					switch d.Kind {
					case policy.Dispatch:
						st := &stats[d.Backend]
						st.Seq++
						st.Received[0]++
						r.OnStats(time.Second, st, nil)
					case policy.Wait:
						r.Cancel(uint64(i))
					}
				}
				b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
