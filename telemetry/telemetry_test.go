package telemetry

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestNormaliseClampsAndMarksAvailable(t *testing.T) {
	n := DefaultNorm()
	tests := []struct {
		name  string
		sig   *Signals
		load  Load
		path  Path
		check func(t *testing.T, p Pressures, avail [NumSignals]bool)
	}{
		{"nothing known", nil, Load{}, Path{}, func(t *testing.T, p Pressures, avail [NumSignals]bool) {
			for s := range NumSignals {
				if avail[s] || p[s] != 0 {
					t.Errorf("%s: available %v pressure %v, want neither", s, avail[s], p[s])
				}
			}
		}},
		{"queue from load", nil, Load{Capacity: 100, Waiting: 25}, Path{}, func(t *testing.T, p Pressures, avail [NumSignals]bool) {
			if !avail[SigQueue] || p[SigQueue] != 0.5 {
				t.Errorf("queue %v (avail %v), want 0.5", p[SigQueue], avail[SigQueue])
			}
		}},
		{"queue saturates", nil, Load{Capacity: 10, Waiting: 1000}, Path{}, func(t *testing.T, p Pressures, _ [NumSignals]bool) {
			if p[SigQueue] != 1 {
				t.Errorf("queue %v, want 1", p[SigQueue])
			}
		}},
		{"network", nil, Load{}, Path{Known: true, RTT: 125 * ms, Jitter: 50 * ms}, func(t *testing.T, p Pressures, avail [NumSignals]bool) {
			if p[SigRTT] != 0.5 || p[SigJitter] != 1 || !avail[SigRTT] || !avail[SigJitter] {
				t.Errorf("rtt %v jitter %v, want 0.5 and 1", p[SigRTT], p[SigJitter])
			}
		}},
		{"no hardware", &Signals{TTFTP95: 10 * time.Second, ErrorRate: math.NaN(), KVFill: -3, GPUUtil: 1}, Load{Capacity: 10}, Path{},
			func(t *testing.T, p Pressures, avail [NumSignals]bool) {
				if p[SigTTFT] != 1 || p[SigErrors] != 0 || p[SigKV] != 0 {
					t.Errorf("ttft %v errors %v kv %v, want 1, 0, 0", p[SigTTFT], p[SigErrors], p[SigKV])
				}
				for s := range NumSignals {
					if s.Hardware() && (avail[s] || p[s] != 0) {
						t.Errorf("%s available without hardware", s)
					}
				}
			}},
		{"thermal from temperature", &Signals{Hardware: true, TempC: 81.5}, Load{Capacity: 1}, Path{}, func(t *testing.T, p Pressures, avail [NumSignals]bool) {
			if math.Abs(p[SigThermal]-0.5) > 1e-9 || !avail[SigThermal] {
				t.Errorf("thermal %v, want 0.5", p[SigThermal])
			}
		}},
		{"thermal from clock", &Signals{Hardware: true, TempC: 60, SMClockMHz: 1700, MaxSMClockMHz: 2000}, Load{Capacity: 1}, Path{},
			func(t *testing.T, p Pressures, _ [NumSignals]bool) {
				if math.Abs(p[SigThermal]-0.5) > 1e-9 {
					t.Errorf("thermal %v, want 0.5 (15%% clock drop of 30%% full)", p[SigThermal])
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, avail := Normalise(tt.sig, tt.load, tt.path, n)
			for s, v := range p {
				if v < 0 || v > 1 {
					t.Errorf("%s = %v outside [0,1]", Signal(s), v)
				}
			}
			tt.check(t, p, avail)
		})
	}
}

func TestScoreFallbackKeepsLoadShare(t *testing.T) {
	w := DefaultWeights()
	// The same load read with and without hardware gives the same score
	// when every load pressure is equal.
	sig := &Signals{Hardware: true, TTFTP95: 2500 * ms, KVFill: 0.5, GPUUtil: 0.5, MemUtil: 0.5, SMOccupancy: 0.5, DRAMActive: 0.5, TempC: 40}
	load := Load{Capacity: 100, Waiting: 25}
	p, avail := Normalise(sig, load, Path{}, DefaultNorm())
	with, fbWith := Score(p, avail, w)
	sig.Hardware = false
	p, avail = Normalise(sig, load, Path{}, DefaultNorm())
	without, fbWithout := Score(p, avail, w)
	if fbWith || !fbWithout {
		t.Errorf("fallback flags %v, %v; want false with hardware, true without", fbWith, fbWithout)
	}
	if math.Abs(with-without) > 1e-9 || math.Abs(with-0.4) > 1e-9 {
		t.Errorf("score %v with hardware, %v without; want both 0.4 (half of the 0.8 load weight)", with, without)
	}
	// Errors alone take a backend to full pressure.
	var pe Pressures
	var all [NumSignals]bool
	for s := range all {
		all[s] = true
	}
	pe[SigErrors] = 1
	if s, _ := Score(pe, all, w); s != 1 {
		t.Errorf("full error pressure scores %v, want 1", s)
	}
}

func TestProjectorHysteresis(t *testing.T) {
	pr := DefaultProjector()
	tests := []struct {
		cur   int
		score float64
		want  int
	}{
		{0, 0.3, 70},   // first weight applies
		{70, 0.35, 70}, // 65 is within the band
		{70, 0.41, 59}, // 59 is 11 away
		{70, 0.25, 70}, // 75: 5 away
		{70, 1, 1},     // a full score drops to the minimum at once
		{70, 0.999, 1}, // rounds to 0: the minimum
		{95, 0, 100},   // recovery to the maximum applies
		{1, 0.95, 1},   // 5 is within the band of 1
		{1, 0.5, 50},   // recovers in one step
		{50, math.NaN(), 100},
	}
	for _, tt := range tests {
		if got := pr.Project(tt.cur, tt.score); got != tt.want {
			t.Errorf("Project(%d, %v) = %d, want %d", tt.cur, tt.score, got, tt.want)
		}
	}
	if err := (Projector{Max: 10, Min: 0}).Validate(); err == nil {
		t.Error("a minimum weight of 0 was accepted")
	}
}

func TestPathEstimator(t *testing.T) {
	var e PathEstimator
	if e.Path(0).Known {
		t.Fatal("known before any sample")
	}
	// Constant RTT: no jitter.
	for i := range 50 {
		e.Observe(time.Duration(i)*500*ms, 40*ms)
	}
	if p := e.Path(25 * time.Second); p.RTT != 40*ms || p.Jitter != 0 || p.Samples != 50 {
		t.Errorf("constant 40 ms: %+v", p)
	}
	// Alternating 30/50 ms: RTT converges to 40 ms, jitter to the mean
	// absolute deviation, 10 ms.
	var a PathEstimator
	for i := range 400 {
		rtt := 30 * ms
		if i%2 == 1 {
			rtt = 50 * ms
		}
		a.Observe(time.Duration(i)*ms, rtt)
	}
	p := a.Path(time.Second)
	if d := p.RTT - 40*ms; d < -3*ms || d > 3*ms {
		t.Errorf("alternating: RTT %v, want about 40ms", p.RTT)
	}
	if d := p.Jitter - 10*ms; d < -1500*time.Microsecond || d > 1500*time.Microsecond {
		t.Errorf("alternating: jitter %v, want about 10ms", p.Jitter)
	}
	a.Stale = time.Second
	if a.Path(3 * time.Second).Known {
		t.Error("still known 2.6 s after the last sample with Stale = 1 s")
	}
	a.Observe(3*time.Second, -ms)
	if a.Path(3 * time.Second).Known {
		t.Error("a negative sample counted")
	}
}

func TestWindowPercentile(t *testing.T) {
	w := Window{Span: 10 * time.Second, Max: 1000}
	if _, ok := w.Percentile(0, 0.95); ok {
		t.Error("percentile of nothing")
	}
	for i := 1; i <= 100; i++ {
		w.Add(time.Duration(i)*100*ms, float64(i))
	}
	if v, _ := w.Percentile(10*time.Second, 0.95); v != 95 {
		t.Errorf("p95 of 1..100 = %v, want 95", v)
	}
	// 5 s later only the samples of the last 10 s remain: 51..100.
	if n := w.Len(15 * time.Second); n != 50 {
		t.Errorf("%d samples left, want 50", n)
	}
	if v, _ := w.Percentile(15*time.Second, 0.5); v != 75 {
		t.Errorf("median %v, want 75", v)
	}
	small := Window{Span: time.Hour, Max: 3}
	for i := range 10 {
		small.Add(time.Duration(i), float64(i))
	}
	if v, _ := small.Percentile(10, 0); v != 7 || small.Len(10) != 3 {
		t.Errorf("bounded window keeps %d, least %v; want 3 and 7", small.Len(10), v)
	}
}

func TestErrorRateDecays(t *testing.T) {
	e := ErrorRate{HalfLife: time.Second}
	for i := range 99 {
		e.Observe(time.Duration(i)*10*ms, true)
	}
	if r := e.Rate(time.Second); r < 0.9 {
		t.Errorf("after 99 failures the rate is %v, want > 0.9", r)
	}
	for i := range 600 {
		e.Observe(time.Second+time.Duration(i)*10*ms, false)
	}
	if r := e.Rate(7 * time.Second); r > 0.02 {
		t.Errorf("6 s of successes later the rate is %v, want < 0.02", r)
	}
	one := ErrorRate{HalfLife: time.Second}
	one.Observe(0, true)
	if r := one.Rate(0); r != 0.5 {
		t.Errorf("one failure reads %v, want 0.5", r)
	}
}

func TestMockDCGM(t *testing.T) {
	idle := MockDCGM(0, GPUState{MaxSeqs: 25, KVTokens: 1000})
	busy := MockDCGM(1, GPUState{Busy: 1, Batch: 25, MaxSeqs: 25, KVUsed: 1000, KVTokens: 1000})
	hot := MockDCGM(2, GPUState{Busy: 1, Batch: 25, MaxSeqs: 25, KVUsed: 1000, KVTokens: 1000, ThermalC: 20, ClockFactor: 0.8})
	if idle.UtilPct != 0 || busy.UtilPct != 100 || idle.TempC >= busy.TempC || busy.TempC >= hot.TempC {
		t.Errorf("util %v/%v, temp %v/%v/%v: want idle < busy < hot", idle.UtilPct, busy.UtilPct, idle.TempC, busy.TempC, hot.TempC)
	}
	if idle.FBUsedMiB+idle.FBFreeMiB != MockFBTotalMiB || busy.FBUsedMiB <= idle.FBUsedMiB {
		t.Errorf("framebuffer idle %v+%v, busy %v", idle.FBUsedMiB, idle.FBFreeMiB, busy.FBUsedMiB)
	}
	if hot.SMClockMHz != math.Round(0.8*MockMaxClockMHz) || busy.SMClockMHz != MockMaxClockMHz {
		t.Errorf("clocks %v and %v", busy.SMClockMHz, hot.SMClockMHz)
	}
	var sig Signals
	Hardware(&sig, []GPUValues{idle, busy, hot})
	if !sig.Hardware || math.Abs(sig.GPUUtil-2.0/3) > 1e-9 || sig.TempC != hot.TempC || sig.SMClockMHz != hot.SMClockMHz {
		t.Errorf("aggregate %+v", sig)
	}
	Hardware(&sig, nil)
	if sig.Hardware {
		t.Error("no GPUs still reads as hardware present")
	}
}

func TestWriteDCGMEscapes(t *testing.T) {
	var b bytes.Buffer
	if err := WriteDCGM(&b, "a\"b\\c\nd", []GPUValues{MockDCGM(0, GPUState{Busy: 0.5})}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `Hostname="a\"b\\c\nd"`) || !strings.Contains(b.String(), "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"") {
		t.Errorf("unexpected text:\n%s", b.String())
	}
}
