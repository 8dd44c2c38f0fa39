package policy

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// poissonTail is P(N >= m) for N Poisson with mean mu, summed from the top
// in log space: a computation independent of burstThreshold's.
func poissonTail(mu float64, m int) float64 {
	if m <= 0 {
		return 1
	}
	sum := 0.0
	for j := m; j < m+2000; j++ {
		lg, _ := math.Lgamma(float64(j) + 1)
		sum += math.Exp(float64(j)*math.Log(mu) - mu - lg)
	}
	return sum
}

// TestBurstThreshold: the threshold is the least count whose tail keeps
// the false firings within the rate asked for.
func TestBurstThreshold(t *testing.T) {
	for _, tt := range []struct{ rate, window, alarms float64 }{
		{15, 0.1, 6.0 / 3600}, {15, 0.1, 60.0 / 3600}, {1, 0.1, 6.0 / 3600}, {200, 0.1, 6.0 / 3600},
		{5000, 0.1, 1.0 / 3600}, {0.5, 1, 0.01 / 3600}, {40, 0.01, 3600.0 / 3600},
	} {
		m := burstThreshold(tt.rate, tt.window, tt.alarms)
		mu := tt.rate * tt.window
		if got := tt.rate * poissonTail(mu, m); got > tt.alarms*1.000001 {
			t.Errorf("rate %v window %v: threshold %d fires %g times a second, want at most %g", tt.rate, tt.window, m, got, tt.alarms)
		}
		if m > 1 {
			if got := tt.rate * poissonTail(mu, m-1); got <= tt.alarms*0.999999 {
				t.Errorf("rate %v window %v: threshold %d is not the least (%d fires %g <= %g a second)", tt.rate, tt.window, m, m-1, got, tt.alarms)
			}
		}
	}
	if m := burstThreshold(0, 0.1, 6.0/3600); m != 1 {
		t.Errorf("no traffic: threshold %d, want 1", m)
	}
	if m := burstThreshold(1e9, 0.1, 6.0/3600); m != maxBurstCount {
		t.Errorf("1e9 arrivals a second: threshold %d, want the bound %d", m, maxBurstCount)
	}
}

// poissonArrivals appends arrivals at rate a second over [from, to).
func poissonArrivals(rng *rand.Rand, out []time.Duration, rate float64, from, to time.Duration) []time.Duration {
	for at := from; ; {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if at >= to {
			return out
		}
		out = append(out, at)
	}
}

// TestBurstDetectorMatchesCount: at every arrival, the detector fires
// exactly when a plain count of the arrivals within the window before it
// reaches the threshold, while the rate, and so the threshold and the ring
// of times, changes.
func TestBurstDetectorMatchesCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var at []time.Duration
	s := time.Second
	at = poissonArrivals(rng, at, 5, 0, 60*s)
	at = poissonArrivals(rng, at, 150, 60*s, 100*s) // the rate rises: the threshold rises
	for range 40 {
		at = append(at, 100*s) // a burst at one instant
	}
	at = poissonArrivals(rng, at, 2, 100*s, 200*s)  // and falls
	at = poissonArrivals(rng, at, 40, 260*s, 300*s) // after a silence longer than the baseline
	d := newBurstDetector(DefaultBurstParams())
	fired, armed := 0, 0
	for i, now := range at {
		d.advance(now) // as arrive does first; a second call at the same now changes nothing
		need := d.need
		n := 0
		for j := i - 1; j >= 0 && now-at[j] <= d.p.Window; j-- {
			n++
		}
		want := need > 0 && n >= need
		if got := d.arrive(now); got != want {
			t.Fatalf("arrival %d at %v: fired %v, want %v (%d arrivals within the window, threshold %d)", i, now, got, want, n, need)
		}
		if want {
			fired++
		}
		if need > 0 {
			armed++
		}
	}
	if fired == 0 || armed == 0 {
		t.Errorf("fired %d times, armed at %d arrivals: the test exercised nothing", fired, armed)
	}
}

// TestBurstDetectorFalseAlarms: on Poisson arrivals, the detector turns on
// no more often than its false-alarm rate; a burst of a third of a second's
// arrivals at once turns it on, for Hold.
func TestBurstDetectorFalseAlarms(t *testing.T) {
	for _, rate := range []float64{15, 300} {
		bp := DefaultBurstParams()
		d := newBurstDetector(bp)
		rng := rand.New(rand.NewPCG(uint64(rate), 1))
		const hours = 10
		end := hours * time.Hour
		ons := 0
		for at := time.Duration(0); ; {
			at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			if at >= end {
				break
			}
			was := d.on(at)
			if d.arrive(at) && !was {
				ons++
			}
		}
		if limit := bp.FalseAlarms * hours; float64(ons) > limit {
			t.Errorf("rate %v/s: turned on %d times in %d hours of Poisson arrivals, want at most %v", rate, ons, hours, limit)
		}
		burst := end + time.Second
		fired := false
		for range int(rate/3) + 10 {
			fired = d.arrive(burst) || fired
		}
		if !fired || !d.on(burst+bp.Hold) || d.on(burst+bp.Hold+time.Millisecond) {
			t.Errorf("rate %v/s: a burst of %d at once: fired %v, on through Hold %v, off after %v", rate, int(rate/3)+10, fired, d.on(burst+bp.Hold), !d.on(burst+bp.Hold+time.Millisecond))
		}
	}
}

// TestPressureBurstMovesLevelsAtOnce: in a burst the levels follow the
// router's own count of busy slots at once, to more pressure only; in quiet
// times, or with the detector off, the hysteresis holds them.
func TestPressureBurstMovesLevelsAtOnce(t *testing.T) {
	for _, detector := range []bool{true, false} {
		pp := DefaultPressureParams()
		if !detector {
			pp.Burst.Window = 0
		}
		p, err := NewPressure(DefaultParams(), pp, backends(3))
		if err != nil {
			t.Fatal(err)
		}
		vs := pressureViews(3)
		for i := range vs {
			vs[i].Capacity, vs[i].Active = 100, 50
		}
		// 60 s of quiet arrivals at 10 a second: the detector arms.
		rng := rand.New(rand.NewPCG(3, 3))
		var at []time.Duration
		at = poissonArrivals(rng, at, 10, 0, 60*time.Second)
		for i, now := range at {
			p.Pick(now, &Request{Session: uint64(i), Arrived: now, QueuedAt: -1, Arrival: true}, vs)
		}
		quiet := now(at)
		before := p.LastWeights(nil)
		// Slots fill, less than the hysteresis moves a level: nothing moves.
		for i := range vs {
			vs[i].Active = 55
		}
		p.Pick(quiet+time.Second, &Request{Session: 1e9, Arrived: quiet + time.Second, QueuedAt: -1, Arrival: true}, vs)
		if got := p.LastWeights(nil); !sameWeights(got, before) {
			t.Fatalf("detector %v: a quiet pick moved weights %v -> %v", detector, before, got)
		}
		// A burst: 30 requests at once, each counted as dispatched.
		burst := quiet + 2*time.Second
		for s := range 30 {
			d := p.Pick(burst, &Request{Session: 2e9 + uint64(s), Arrived: burst, QueuedAt: -1, Arrival: true}, vs)
			if d.Kind == Dispatch {
				vs[d.Backend].Pending++
			}
		}
		after := p.LastWeights(nil)
		if moved := !sameWeights(after, before); moved != detector {
			t.Errorf("detector %v: the burst moved the weights: %v (%v -> %v)", detector, moved, before, after)
		}
		for b := range after {
			if after[b].Rank > before[b].Rank {
				t.Errorf("detector %v: backend %d went to less pressure in a burst, level %d -> %d", detector, b, before[b].Rank, after[b].Rank)
			}
		}
		// Still on: load that falls keeps the hysteresis.
		for i := range vs {
			vs[i].Active, vs[i].Pending = 45, 0
		}
		p.Pick(burst+time.Millisecond, &Request{Session: 3e9, Arrived: burst + time.Millisecond, QueuedAt: -1, Arrival: true}, vs)
		if got := p.LastWeights(nil); !sameWeights(got, after) {
			t.Errorf("detector %v: less load in a burst moved weights %v -> %v", detector, after, got)
		}
	}
}

func now(at []time.Duration) time.Duration { return at[len(at)-1] }

func sameWeights(a, b []BackendWeight) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Weight != b[i].Weight {
			return false
		}
	}
	return true
}

func TestBurstParamsValidate(t *testing.T) {
	if err := DefaultBurstParams().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (BurstParams{}).Validate(); err != nil {
		t.Errorf("detector off: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(bp *BurstParams)
		want   string
	}{
		{"negative window", func(bp *BurstParams) { bp.Window = -time.Millisecond }, "window"},
		{"window too long", func(bp *BurstParams) { bp.Window = time.Minute }, "window"},
		{"short baseline", func(bp *BurstParams) { bp.Baseline = 500 * time.Millisecond }, "baseline"},
		{"no false alarms", func(bp *BurstParams) { bp.FalseAlarms = 0 }, "false_alarms"},
		{"NaN false alarms", func(bp *BurstParams) { bp.FalseAlarms = math.NaN() }, "false_alarms"},
		{"negative hold", func(bp *BurstParams) { bp.Hold = -time.Second }, "hold"},
		{"hysteresis 0", func(bp *BurstParams) { bp.Hysteresis = 0 }, "hysteresis"},
	}
	for _, tt := range tests {
		bp := DefaultBurstParams()
		tt.mutate(&bp)
		err := bp.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one naming %s", tt.name, err, tt.want)
		}
	}
	pp := DefaultPressureParams()
	pp.Burst.Hysteresis = 0
	if _, err := NewPressure(DefaultParams(), pp, backends(2)); err == nil || !strings.Contains(err.Error(), "burst") {
		t.Errorf("pressure built with burst hysteresis 0: %v", err)
	}
}

// BenchmarkBurstArrive is the burst detector's cost per arrival at 1,000
// arrivals a second (a bucket closes, and the threshold is recomputed,
// every 1,000 arrivals).
func BenchmarkBurstArrive(b *testing.B) {
	d := newBurstDetector(DefaultBurstParams())
	b.ReportAllocs()
	at := time.Duration(0)
	for b.Loop() {
		at += time.Millisecond
		d.arrive(at)
	}
}

// TestBurstCountsMarkedArrivals: the detector counts the picks the router
// marks as arrivals (Request.Arrival) and no other, even one that looks new:
// a waiter asked again at the instant it arrived after its queue's backend
// was removed, or a retry whose refusing backends are all gone.
func TestBurstCountsMarkedArrivals(t *testing.T) {
	p, err := NewPressure(DefaultParams(), DefaultPressureParams(), backends(3))
	if err != nil {
		t.Fatal(err)
	}
	vs := pressureViews(3)
	const at = 5 * time.Second
	picks := []struct {
		name   string
		r      Request
		counts bool
	}{
		{"an arrival", Request{Session: 1, Arrived: at, QueuedAt: -1, Arrival: true}, true},
		{"a waiter asked again at the instant it arrived, not queued", Request{Session: 1, Arrived: at, QueuedAt: -1}, false},
		{"a waiter queued", Request{Session: 1, Arrived: at, QueuedAt: 0}, false},
		{"an arrival with backends skipped from the start", Request{Session: 2, Arrived: at, QueuedAt: -1, Exclude: []int{0}, Arrival: true}, true},
		{"a retry whose refusing backends are gone", Request{Session: 3, Arrived: at, QueuedAt: -1}, false},
	}
	want := 0
	for _, pk := range picks {
		r := pk.r
		p.Pick(at, &r, vs)
		if pk.counts {
			want++
		}
		if got := p.burst.buckets[p.burst.cur]; got != want {
			t.Errorf("after %s: %d arrivals counted, want %d", pk.name, got, want)
		}
	}
}
