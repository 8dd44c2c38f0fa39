package router

import (
	"slices"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
)

// arrivalLog is a policy that counts the picks the router marks as a
// request's arrival (policy.Request.Arrival). Its first pick of each
// request waits at backend 0; later ones dispatch to the first eligible
// backend the request does not exclude.
type arrivalLog struct {
	picks, arrivals int
	seen            map[uint64]bool
}

func (*arrivalLog) Name() string { return "arrival-log" }

func (p *arrivalLog) Pick(now time.Duration, r *policy.Request, views []policy.View) policy.Decision {
	p.picks++
	if r.Arrival {
		p.arrivals++
	}
	if !p.seen[r.Session] {
		p.seen[r.Session] = true
		return policy.Decision{Kind: policy.Wait, Backend: 0, Until: now + time.Second}
	}
	for i := range views {
		if views[i].Eligible && !slices.Contains(r.Exclude, i) {
			return policy.Decision{Kind: policy.Dispatch, Backend: i}
		}
	}
	return policy.Decision{Kind: policy.Reject, Reason: "none left"}
}

// TestArrivalMarkedOnce: the router marks a request's first pick only as
// an arrival, so the pressure policy's burst detector counts each request
// once, whether it waits and is asked again at the instant it arrived or
// comes back as a retry whose refusing backend is gone.
func TestArrivalMarkedOnce(t *testing.T) {
	const at = 2 * time.Second
	tests := []struct {
		name string
		// then does what follows the request's Route at the same instant
		// (its backends are 0, 1 and 2).
		then  func(t *testing.T, r *Router)
		picks int
	}{
		{"waits, asked again on stats", func(t *testing.T, r *Router) {
			out := r.OnStats(at, &gateway.Stats{Backend: 0, Seq: 2, Capacity: 10, Active: 1}, nil)
			if len(out) != 1 || out[0].Decision.Kind != policy.Dispatch {
				t.Fatalf("stats with a free slot decided %+v, want one dispatch", out)
			}
		}, 2},
		{"waits, its queue's backend removed", func(t *testing.T, r *Router) {
			out, err := r.Remove(at, 0, nil)
			if err != nil || len(out) != 1 || out[0].Decision.Kind != policy.Dispatch {
				t.Fatalf("removing the queue's backend decided %+v (%v), want one dispatch", out, err)
			}
		}, 2},
		{"waits, then retried after its backend is removed", func(t *testing.T, r *Router) {
			out, err := r.Remove(at, 0, nil)
			if err != nil || len(out) != 1 || out[0].Decision.Kind != policy.Dispatch {
				t.Fatalf("removing the queue's backend decided %+v (%v), want one dispatch", out, err)
			}
			// The backend it went to refuses it and is removed: the retry
			// excludes no backend the router still knows.
			b := out[0].Decision.Backend
			if _, err := r.Remove(at, b, nil); err != nil {
				t.Fatal(err)
			}
			if d := r.Route(at, 1, Ask{Session: 1, Exclude: []BackendID{b}, Again: true}); d.Kind != policy.Dispatch {
				t.Fatalf("the retry decided %+v, want a dispatch", d)
			}
		}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &arrivalLog{seen: map[uint64]bool{}}
			r, err := New(0, log, []Backend{{Name: "a", Capacity: 10}, {Name: "b", Capacity: 10}, {Name: "c", Capacity: 10}})
			if err != nil {
				t.Fatal(err)
			}
			for b := range 3 {
				r.OnStats(at, &gateway.Stats{Backend: b, Seq: 1, Capacity: 10, Active: 10}, nil)
			}
			if d := r.Route(at, 1, Ask{Session: 1}); d.Kind != policy.Wait {
				t.Fatalf("Route decided %+v, want a wait", d)
			}
			tt.then(t, r)
			if log.picks != tt.picks || log.arrivals != 1 {
				t.Errorf("%d picks, %d marked as arrivals; want %d picks, 1 arrival", log.picks, log.arrivals, tt.picks)
			}
		})
	}
	// A first pick that excludes backends from the start (too short for
	// the prompt) is an arrival too.
	log := &arrivalLog{seen: map[uint64]bool{1: true}}
	r, err := New(0, log, []Backend{{Name: "a", Capacity: 10}, {Name: "b", Capacity: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Route(at, 1, Ask{Session: 1, Exclude: []BackendID{0}}); d.Kind != policy.Dispatch || log.arrivals != 1 {
		t.Errorf("a first pick with a skip list decided %+v with %d arrivals, want a dispatch and 1", d, log.arrivals)
	}
}
