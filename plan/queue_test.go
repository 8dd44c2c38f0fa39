package plan

import (
	"math"
	"testing"
	"time"
)

// The references were computed independently with exact rational
// arithmetic: C(c, a) = (a^c/c! * c/(c-a)) / (sum_{k<c} a^k/k! + a^c/c! * c/(c-a)).
func TestErlangCReferences(t *testing.T) {
	tests := []struct {
		c    int
		a    float64
		want float64
	}{
		{10, 8, 0.40918015079644354},
		{1, 0.5, 0.5}, // M/M/1: C = rho
		{2, 1, 1.0 / 3},
		{50, 45, 0.3638644672069884},
		{100, 95, 0.5064568539130206},
		{5, 4.9, 0.9503169105191671},
		{4, 0, 0},
		{3, 3, 1}, // saturated
		{3, 7, 1}, // overloaded
	}
	for _, tt := range tests {
		if got := ErlangC(tt.c, tt.a); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("ErlangC(%d, %v) = %.17g, want %.17g", tt.c, tt.a, got, tt.want)
		}
	}
	// Stable where the textbook sum overflows: 2,000 servers at 95%.
	if got := ErlangC(2000, 1900); !(got > 0 && got < 1) {
		t.Errorf("ErlangC(2000, 1900) = %v, want a probability", got)
	}
	if !math.IsNaN(ErlangC(0, 1)) || !math.IsNaN(ErlangC(1, math.NaN())) {
		t.Error("invalid input did not give NaN")
	}
}

func TestKimuraWait(t *testing.T) {
	// c = 10, lambda = 8/s, 1 s service: C = 0.4092, theta = 2 x 2 / (1 + cs2).
	q := Queue{Servers: 10, Lambda: 8, MeanService: time.Second, CS2: 1}
	tests := []struct {
		cs2      float64
		p99      float64 // ln(C / 0.01) / theta, computed independently
		meanWait float64 // C / theta
	}{
		{1, 1.8557852162834185, 0.40918015079644354 / 2},
		{0.5, 1.391838912212564, 0.40918015079644354 / (4 / 1.5)},
		{2, 2.783677824425128, 0.40918015079644354 / (4.0 / 3)},
	}
	for _, tt := range tests {
		q.CS2 = tt.cs2
		if got := q.WaitQuantile(0.99); math.Abs(got-tt.p99) > 1e-9 {
			t.Errorf("cs2 %v: P99 wait %v, want %v", tt.cs2, got, tt.p99)
		}
		if got := q.MeanWait(); math.Abs(got-tt.meanWait) > 1e-12 {
			t.Errorf("cs2 %v: mean wait %v, want %v", tt.cs2, got, tt.meanWait)
		}
	}
	// M/M/1 (cs2 = 1) is exact: P(W > t) = rho exp(-(mu - lambda) t).
	mm1 := Queue{Servers: 1, Lambda: 0.5, MeanService: time.Second, CS2: 1}
	if got, want := mm1.WaitQuantile(0.99), math.Log(0.5/0.01)/0.5; math.Abs(got-want) > 1e-12 {
		t.Errorf("M/M/1 P99 wait %v, want %v", got, want)
	}
	if !math.IsNaN(mm1.WaitQuantile(1)) || !math.IsNaN(mm1.WaitQuantile(0)) {
		t.Error("a quantile outside (0, 1) did not give NaN")
	}
	if got := mm1.WaitQuantile(0.4); got != 0 {
		t.Errorf("quantile below P(wait) = %v, want 0", got)
	}
	if !math.IsInf((Queue{Servers: 2, Lambda: 3, MeanService: time.Second}).WaitQuantile(0.99), 1) {
		t.Error("an overloaded queue has a finite wait")
	}
}

func TestSize(t *testing.T) {
	q := Queue{Lambda: 8, MeanService: time.Second, CS2: 1}
	// The cap alone needs ceil(8 / 0.85) = 10 servers; at 10 the P99 wait is
	// 1.86 s, so a 2 s target takes 10 and a 0.5 s target more.
	n, err := Size(q, 2*time.Second, DefaultUtilizationCap, 100)
	if err != nil || n != 10 {
		t.Errorf("Size(2s) = %d, %v; want 10", n, err)
	}
	n, err = Size(q, 500*time.Millisecond, DefaultUtilizationCap, 100)
	if err != nil || n <= 10 {
		t.Fatalf("Size(0.5s) = %d, %v; want more than 10", n, err)
	}
	q.Servers = n
	below := q
	below.Servers--
	if q.WaitQuantile(0.99) > 0.5 || below.WaitQuantile(0.99) <= 0.5 {
		t.Errorf("size %d is not the smallest meeting 0.5 s (P99 %v; one fewer: %v)", n, q.WaitQuantile(0.99), below.WaitQuantile(0.99))
	}
	if _, err := Size(q, time.Millisecond, 0.85, 11); err == nil {
		t.Error("an impossible target was met")
	}
	for _, bad := range []Queue{{Lambda: -1, MeanService: time.Second}, {Lambda: 1}, {Lambda: 1, MeanService: time.Second, CS2: math.NaN()}} {
		if _, err := Size(bad, time.Second, 0.85, 10); err == nil {
			t.Errorf("invalid queue %+v accepted", bad)
		}
	}
	if _, err := Size(Queue{Lambda: 1, MeanService: time.Second}, time.Second, 1.5, 10); err == nil {
		t.Error("a cap above 1 accepted")
	}
}
