package policy

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// rendezvousTop is the backend weighted rendezvous over ws ranks first for
// session s.
func rendezvousTop(s uint64, vs []View, ws []BackendWeight) int {
	best, bestScore := -1, 0.0
	for i := range vs {
		if !vs[i].Eligible {
			continue
		}
		if sc := -float64(ws[i].Weight) / math.Log(unit(mix(s^vs[i].Key))); best < 0 || sc > bestScore {
			best, bestScore = i, sc
		}
	}
	return best
}

func stickyPressure(t *testing.T, n int, mutate func(pp *PressureParams)) *Pressure {
	t.Helper()
	pp := UntunedPressureParams()
	if mutate != nil {
		mutate(&pp)
	}
	p, err := NewPressure(DefaultParams(), pp, backends(n))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPressureStickySessionsStayWhileWeightsMove: when a backend heats up
// its weight falls, new sessions go by the new weights, and sessions placed
// before keep the backend holding their prefix cache; without stickiness
// they follow the weights.
func TestPressureStickySessionsStayWhileWeightsMove(t *testing.T) {
	const sessions = 3000
	for _, sticky := range []bool{true, false} {
		p := stickyPressure(t, 4, func(pp *PressureParams) {
			if !sticky {
				pp.Sticky.Sessions = 0
			}
		})
		vs := pressureViews(4)
		first := make([]int, sessions)
		for s := range first {
			first[s] = p.Pick(0, &Request{Session: uint64(s), QueuedAt: -1}, vs).Backend
		}
		vs[2].Signals.TempC = 88 // full thermal pressure: backend 2's weight falls
		ws := p.Weights(vs, nil)
		if ws[2].Weight >= ws[0].Weight {
			t.Fatalf("hot backend's weight %d, not below a cool one's %d", ws[2].Weight, ws[0].Weight)
		}
		stayed, followed := 0, 0
		for s := range first {
			got := p.Pick(time.Second, &Request{Session: uint64(s), QueuedAt: -1}, vs).Backend
			if got == first[s] {
				stayed++
			}
			if got == rendezvousTop(uint64(s), vs, ws) {
				followed++
			}
		}
		if sticky && stayed != sessions {
			t.Errorf("sticky: %d of %d sessions kept their backend after a weight move", stayed, sessions)
		}
		if !sticky && (followed != sessions || stayed == sessions) {
			t.Errorf("not sticky: %d of %d sessions followed the weights, %d stayed", followed, sessions, stayed)
		}
		// New sessions go by the weights either way.
		for s := uint64(sessions); s < 2*sessions; s++ {
			if got, want := p.Pick(time.Second, &Request{Session: s, QueuedAt: -1}, vs).Backend, rendezvousTop(s, vs, ws); got != want {
				t.Fatalf("sticky %v: new session %d on backend %d, the weights rank %d first", sticky, s, got, want)
			}
		}
	}
}

// TestPressureStickyLeaves: a session leaves its backend when the backend
// fails, cannot take the request, refused it, scores above move_score, costs
// more than a re-prefill, or when the session was forgotten; otherwise it
// stays even when the weights rank another backend first.
func TestPressureStickyLeaves(t *testing.T) {
	tests := []struct {
		name   string
		sticky func(sp *StickyParams)
		change func(vs []View, home int)
		at     time.Duration
		tokens int
		leaves bool
	}{
		{"nothing changed", nil, func([]View, int) {}, time.Second, 0, false},
		{"home hot but within move_score", nil, func(vs []View, h int) { vs[h].Signals.TempC = 88 }, time.Second, 0, false},
		{"home failing", nil, func(vs []View, h int) { vs[h].ErrorRate = 0.5 }, time.Second, 0, true},
		{"home not eligible", nil, func(vs []View, h int) { vs[h].Eligible = false }, time.Second, 0, true},
		{"score above move_score", func(sp *StickyParams) { sp.MoveScore = 0.3 }, func(vs []View, h int) { vs[h].Signals.TempC = 88 }, time.Second, 0, true},
		{"forgotten after the ttl", nil, func(vs []View, h int) { vs[h].Signals.TempC = 88 }, 61 * time.Second, 0, true},
		{"slow home, long context: stays", func(sp *StickyParams) { sp.RePrefillTPS = 10_000 },
			func(vs []View, h int) { vs[h].Signals.TTFTP95 = 3 * time.Second }, time.Second, 40_000, false},
		{"slow home, short context: moves", func(sp *StickyParams) { sp.RePrefillTPS = 10_000 },
			func(vs []View, h int) { vs[h].Signals.TTFTP95 = 3 * time.Second }, time.Second, 4_000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := stickyPressure(t, 4, func(pp *PressureParams) {
				if tt.sticky != nil {
					tt.sticky(&pp.Sticky)
				}
			})
			vs := pressureViews(4)
			for i := range vs {
				vs[i].Signals.TTFTP95 = 500 * time.Millisecond
			}
			// The first 200 sessions whose home is backend 1.
			var homed []uint64
			for s := uint64(1); len(homed) < 200; s++ {
				if p.Pick(0, &Request{Session: s, QueuedAt: -1, Tokens: tt.tokens}, vs).Backend == 1 {
					homed = append(homed, s)
				}
			}
			tt.change(vs, 1)
			left := 0
			for _, s := range homed {
				d := p.Pick(tt.at, &Request{Session: s, QueuedAt: -1, Tokens: tt.tokens}, vs)
				if d.Kind != Dispatch {
					t.Fatalf("session %d: %+v, want a dispatch", s, d)
				}
				if d.Backend != 1 {
					left++
				}
				switch top := rendezvousTop(s, vs, p.LastWeights(nil)); {
				case tt.leaves && d.Backend != top:
					t.Fatalf("session %d on backend %d, the weights rank %d first", s, d.Backend, top)
				case !tt.leaves && d.Backend != 1:
					t.Fatalf("session %d left its home for %d", s, d.Backend)
				}
			}
			if tt.leaves && left == 0 {
				t.Error("no session left its home")
			}
		})
	}
}

// TestPressureStickyRefused: a request its home refused (Exclude) goes
// elsewhere, and the session's new home is where it went.
func TestPressureStickyRefused(t *testing.T) {
	p := stickyPressure(t, 3, nil)
	vs := pressureViews(3)
	home := p.Pick(0, &Request{Session: 7, QueuedAt: -1}, vs).Backend
	d := p.Pick(time.Second, &Request{Session: 7, QueuedAt: -1, Exclude: []int{home}}, vs)
	if d.Kind != Dispatch || d.Backend == home {
		t.Fatalf("refused by its home %d, picked %+v", home, d)
	}
	if again := p.Pick(2*time.Second, &Request{Session: 7, QueuedAt: -1}, vs); again.Backend != d.Backend {
		t.Errorf("next turn on %d, want the new home %d", again.Backend, d.Backend)
	}
}

// TestPressureStickyHomeBusy: a session whose home has no free slot waits
// for it, and overflows to a free backend as pulsar-waw does.
func TestPressureStickyHomeBusy(t *testing.T) {
	p := stickyPressure(t, 3, nil)
	vs := pressureViews(3)
	home := p.Pick(0, &Request{Session: 9, QueuedAt: -1}, vs).Backend
	vs[home].Active = vs[home].Capacity
	d := p.Pick(time.Second, &Request{Session: 9, QueuedAt: -1, Arrived: time.Second}, vs)
	if d.Kind != Wait || d.Backend != home {
		t.Errorf("home busy: %+v, want a wait at the home %d", d, home)
	}
	d = p.Pick(time.Second+DefaultParams().MaxWait/2, &Request{Session: 9, QueuedAt: home, Arrived: time.Second}, vs)
	if d.Kind != Dispatch || d.Backend == home {
		t.Errorf("home busy, band wide: %+v, want an overflow to a free backend", d)
	}
}

// TestStickyTableBoundedAndAged: the table never holds more than its bound,
// forgets a session after the TTL and remembers one within it.
func TestStickyTableBoundedAndAged(t *testing.T) {
	// A flood of new sessions never takes the table past its bound, odd
	// and smallest bounds included.
	for _, bound := range []int{2, 3, 101} {
		tb := newStickyTable(StickyParams{Sessions: bound, TTL: time.Hour, MoveScore: 1})
		for s := uint64(0); s < 1_000; s++ {
			tb.put(time.Duration(s)*time.Millisecond, s, s+1)
			if tb.len() > bound {
				t.Fatalf("bound %d: table holds %d entries after %d puts", bound, tb.len(), s+1)
			}
		}
	}
	tb := newStickyTable(StickyParams{Sessions: 100, TTL: 10 * time.Second, MoveScore: 1})
	for s := uint64(0); s < 10_000; s++ {
		tb.put(time.Duration(s)*time.Millisecond, s, s+1)
		if tb.len() > 100 {
			t.Fatalf("table holds %d entries after %d puts, bound 100", tb.len(), s+1)
		}
	}
	now := 10 * time.Second
	if k, ok := tb.get(now, 9_999); !ok || k != 10_000 {
		t.Errorf("last session: %d %v, want 10000 true", k, ok)
	}
	if _, ok := tb.get(now, 0); ok {
		t.Error("the first session is still held past the bound")
	}
	tb = newStickyTable(StickyParams{Sessions: 100, TTL: 10 * time.Second, MoveScore: 1})
	tb.put(0, 1, 5)
	if _, ok := tb.get(10*time.Second, 1); !ok {
		t.Error("session forgotten at the TTL")
	}
	if _, ok := tb.get(10*time.Second+1, 1); ok {
		t.Error("session remembered past the TTL")
	}
	// Ages rotate generations: an entry refreshed within the TTL survives
	// any number of rotations.
	for i := 1; i <= 20; i++ {
		now := time.Duration(i) * 9 * time.Second
		if _, ok := tb.get(now, 1); !ok {
			t.Fatalf("refreshed session forgotten at %v", now)
		}
		tb.put(now, 1, 5)
		tb.put(now, uint64(1000+i), 6) // other traffic rotates the generations
	}
	if newStickyTable(StickyParams{MoveScore: 1}) != nil {
		t.Error("sessions 0 built a table")
	}
}

func TestStickyParamsValidate(t *testing.T) {
	good := DefaultStickyParams()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(sp *StickyParams)
		want   string
	}{
		{"negative sessions", func(sp *StickyParams) { sp.Sessions = -1 }, "sessions"},
		{"one session", func(sp *StickyParams) { sp.Sessions = 1 }, "sessions"},
		{"too many sessions", func(sp *StickyParams) { sp.Sessions = MaxStickySessions + 1 }, "sessions"},
		{"no ttl", func(sp *StickyParams) { sp.TTL = 0 }, "ttl"},
		{"move_score 0", func(sp *StickyParams) { sp.MoveScore = 0 }, "move_score"},
		{"move_score above 1", func(sp *StickyParams) { sp.MoveScore = 1.5 }, "move_score"},
		{"move_score NaN", func(sp *StickyParams) { sp.MoveScore = math.NaN() }, "move_score"},
		{"negative reprefill", func(sp *StickyParams) { sp.RePrefillTPS = -1 }, "reprefill_tps"},
		{"infinite reprefill", func(sp *StickyParams) { sp.RePrefillTPS = math.Inf(1) }, "reprefill_tps"},
	}
	for _, tt := range tests {
		sp := good
		tt.mutate(&sp)
		err := sp.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one naming %s", tt.name, err, tt.want)
		}
	}
	off := StickyParams{MoveScore: 1}
	if err := off.Validate(); err != nil {
		t.Errorf("stickiness off without a ttl: %v", err)
	}
	pp := DefaultPressureParams()
	pp.Sticky.MoveScore = 2
	if _, err := NewPressure(DefaultParams(), pp, backends(2)); err == nil {
		t.Error("pressure built with move_score 2")
	}
	_ = telemetry.SigQueue
}

// TestPressureStickyThroughMembership: sessions name their backend by key,
// so a reordering or a departure of other backends keeps them home, and
// the departure of their own backend places them by the weights.
func TestPressureStickyThroughMembership(t *testing.T) {
	bs := backends(4)
	p := stickyPressure(t, 4, nil)
	vs := pressureViews(4)
	home := map[uint64]uint64{}
	for s := uint64(1); s <= 400; s++ {
		home[s] = vs[p.Pick(0, &Request{Session: s, QueuedAt: -1}, vs).Backend].Key
	}
	// Backend 0 leaves; the others come back in reverse order.
	kept := []int{3, 2, 1}
	nbs, nvs := make([]Backend, len(kept)), make([]View, len(kept))
	for i, k := range kept {
		nbs[i], nvs[i] = bs[k], vs[k]
		nvs[i].Index = i
	}
	p.SetBackends(nbs, kept)
	nvs[0].Signals.TempC = 88 // backend 3's weight falls: only stickiness keeps its sessions there
	for s := uint64(1); s <= 400; s++ {
		got := nvs[p.Pick(time.Second, &Request{Session: s, QueuedAt: -1}, nvs).Backend].Key
		if home[s] != bs[0].Key && got != home[s] {
			t.Fatalf("session %d moved from its backend after a membership change", s)
		}
		if got == bs[0].Key {
			t.Fatalf("session %d placed on the departed backend", s)
		}
	}
	// Without stickiness, the same change moves some of backend 3's sessions.
	q := stickyPressure(t, 4, func(pp *PressureParams) { pp.Sticky.Sessions = 0 })
	moved := 0
	for s := uint64(1); s <= 400; s++ {
		if home[s] == bs[3].Key && nvs[q.Pick(time.Second, &Request{Session: s, QueuedAt: -1}, nvs).Backend].Key != home[s] {
			moved++
		}
	}
	if moved == 0 {
		t.Error("the weight change moves none of backend 3's sessions even without stickiness: the test shows nothing")
	}
}
