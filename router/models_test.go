package router

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
)

// modelFleet is a router over backends a (m1, capacity 10), b (m2, 10) and
// c (m1, 30), placing with pol.
func modelFleet(t *testing.T, pol string) *Router {
	t.Helper()
	rb := []Backend{
		{Name: "a", Capacity: 10, Models: []string{"m1"}},
		{Name: "b", Capacity: 10, Models: []string{"m2"}},
		{Name: "c", Capacity: 30, Models: []string{"m1", "m1-lora"}},
	}
	return routerFor(t, pol, rb)
}

// routerFor is a router over rb placing with pol, its randomness seeded.
func routerFor(t *testing.T, pol string, rb []Backend) *Router {
	t.Helper()
	bs := make([]policy.Backend, len(rb))
	for i, b := range rb {
		bs[i] = policy.Backend{Name: b.Name, Key: policy.KeyOf(b.Name)}
	}
	p, err := policy.NewRegistry().New(pol, policy.DefaultParams(), bs, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(0, p, rb)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestServes(t *testing.T) {
	for _, tc := range []struct {
		models []string
		model  string
		want   bool
	}{
		{[]string{"m1"}, "m1", true},
		{[]string{"m1"}, "m2", false},
		{nil, "m2", true},             // lists none: takes every model
		{[]string{"m1"}, "", true},    // names none: goes anywhere
		{[]string{"m1"}, "M1", false}, // ids are exact
	} {
		if got := Serves(tc.models, tc.model); got != tc.want {
			t.Errorf("Serves(%v, %q) = %v, want %v", tc.models, tc.model, got, tc.want)
		}
	}
}

// Every policy places a request only on a backend that serves its model,
// and weighs the model's backends as a pool of their own: pulsar-waw's
// capacity weights give c (30) three sessions in four of m1's.
func TestPlacementByModel(t *testing.T) {
	for _, pol := range policy.NewRegistry().Names() {
		t.Run(pol, func(t *testing.T) {
			r := modelFleet(t, pol)
			got := map[string]map[BackendID]int{"m1": {}, "m2": {}, "m1-lora": {}}
			const n = 400
			for i := range n {
				for _, m := range []string{"m1", "m2", "m1-lora"} {
					id := uint64(i)
					d := r.Route(0, id, Ask{Session: id*2654435761 + 1, Model: m})
					if d.Kind == policy.Wait {
						r.Cancel(id)
						continue
					}
					if d.Kind != policy.Dispatch {
						t.Fatalf("%s: %v (%s)", m, d.Kind, d.Reason)
					}
					got[m][d.Backend]++
					r.Undispatch(d.Backend)
				}
			}
			if got["m1"][1] > 0 || got["m1-lora"][0] > 0 || got["m1-lora"][1] > 0 || got["m2"][0] > 0 || got["m2"][2] > 0 {
				t.Fatalf("a request went to a backend that does not serve its model: %v", got)
			}
			if pol == "pulsar-waw" {
				if share := float64(got["m1"][2]) / float64(got["m1"][0]+got["m1"][2]); share < 0.65 || share > 0.85 {
					t.Errorf("c's share of m1 is %.2f, want about 0.75 (its capacity over the m1 pool's): %v", share, got["m1"])
				}
			}
		})
	}
}

// A request waiting for its model's backend is never handed to a free
// backend of another model.
func TestWaiterKeepsItsModel(t *testing.T) {
	r := modelFleet(t, "pulsar-waw")
	r.OnStats(0, &gateway.Stats{Backend: 0, Seq: 1, Capacity: 10, Active: 10}, nil)
	r.OnStats(0, &gateway.Stats{Backend: 2, Seq: 1, Capacity: 30, Active: 30}, nil)
	d := r.Route(0, 1, Ask{Session: 7, Model: "m1"})
	if d.Kind != policy.Wait {
		t.Fatalf("m1 with its backends full: %v, want wait", d.Kind)
	}
	out := r.OnStats(ms, &gateway.Stats{Backend: 1, Seq: 2, Capacity: 10}, nil)
	out = r.OnTimer(d.Until, out)
	for _, o := range out {
		if o.Decision.Kind == policy.Dispatch && o.Decision.Backend == 1 {
			t.Fatalf("an m1 request went to b, which serves m2 only")
		}
	}
}

func TestKnowsAndOthersFit(t *testing.T) {
	r := modelFleet(t, "pulsar-waw")
	if !r.Knows("m1-lora") || r.Knows("m3") {
		t.Errorf("Knows: m1-lora %v, m3 %v", r.Knows("m1-lora"), r.Knows("m3"))
	}
	if got := r.Models(); len(got) != 3 || got[0] != "m1" || got[1] != "m1-lora" || got[2] != "m2" {
		t.Errorf("Models() = %v", got)
	}
	if r.OthersFitModel(1, 10, "m2") {
		t.Error("OthersFitModel: b is m2's only backend")
	}
	if !r.OthersFitModel(0, 10, "m1") {
		t.Error("OthersFitModel: c serves m1 too")
	}
	if err := r.SetModels(0, 1, nil); err != nil || !r.Knows("m3") {
		t.Errorf("a backend that lists no model takes every model: %v", err)
	}
}

// BenchmarkRouteByModel is one placement over 64 backends, half serving
// each of two models: with the model filter, and without a model.
func BenchmarkRouteByModel(b *testing.B) {
	for _, model := range []string{"", "m1"} {
		b.Run("model="+model, func(b *testing.B) {
			rb := make([]Backend, 64)
			bs := make([]policy.Backend, len(rb))
			for i := range rb {
				name := fmt.Sprintf("b%d", i)
				rb[i] = Backend{Name: name, Capacity: 1 << 20, Models: []string{[]string{"m1", "m2"}[i%2]}}
				bs[i] = policy.Backend{Name: name, Key: policy.KeyOf(name)}
			}
			p, err := policy.NewRegistry().New("pulsar-waw", policy.DefaultParams(), bs, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				b.Fatal(err)
			}
			r, err := New(0, p, rb)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := range b.N {
				d := r.Route(0, uint64(i), Ask{Session: uint64(i), Model: model})
				r.Undispatch(d.Backend)
			}
		})
	}
}
