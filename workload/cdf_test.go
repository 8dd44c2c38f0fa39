package workload

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseCDF(t *testing.T) {
	cdf, err := ParseCDF([]byte(`[[1000, 0.5], [4000, 0.9], [32000, 1]]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cdf) != 3 || cdf.Max() != 32000 || cdf.Fraction(1000) != 0.5 || math.Abs(cdf.Fraction(2500)-0.7) > 1e-12 {
		t.Errorf("cdf %v: max %d, F(1000) %v, F(2500) %v", cdf, cdf.Max(), cdf.Fraction(1000), cdf.Fraction(2500))
	}
	for _, tt := range []struct{ in, want string }{
		{`{}`, "JSON list"},
		{`[]`, "no points"},
		{`[[100, 0.5]]`, "last fraction must be 1"},
		{`[[100, 0.5], [50, 1]]`, "tokens must increase"},
		{`[[100, 0.5], [200, 0.4], [300, 1]]`, "fractions not decrease"},
		{`[[100]]`, "want [tokens, fraction]"},
		{`[[0, 1]]`, "whole number"},
		{`[[10.5, 1]]`, "whole number"},
		{`[[10, 1.5]]`, "fraction must be in"},
		{`[[10, 1]] [[1, 1]]`, "more than one"},
	} {
		if _, err := ParseCDF([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseCDF(%s) = %v, want an error with %q", tt.in, err, tt.want)
		}
	}
}

func FuzzParseCDF(f *testing.F) {
	f.Add(`[[1000, 0.5], [4000, 0.9], [32000, 1]]`)
	f.Add(`[[1, 1]]`)
	f.Fuzz(func(t *testing.T, in string) {
		cdf, err := ParseCDF([]byte(in))
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for range 100 {
			if v := cdf.Sample(rng); v < 1 || v > cdf.Max() {
				t.Fatalf("sample %d outside [1, %d]", v, cdf.Max())
			}
		}
	})
}

// TestSampleFollowsCDF: the share of samples at or below each point is the
// point's fraction, and samples are uniform inside an interval.
func TestSampleFollowsCDF(t *testing.T) {
	cdf := CDF{{1000, 0.5}, {4000, 0.9}, {32000, 1}}
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 200_000
	var below [3]int
	var sumMid float64
	var nMid int
	for range n {
		v := cdf.Sample(rng)
		if v < 1 || v > 32000 {
			t.Fatalf("sample %d outside [1, 32000]", v)
		}
		for i, p := range cdf {
			if float64(v) <= p[0] {
				below[i]++
			}
		}
		if v > 1000 && v <= 4000 {
			sumMid += float64(v)
			nMid++
		}
	}
	for i, p := range cdf {
		if got := float64(below[i]) / n; math.Abs(got-p[1]) > 0.005 {
			t.Errorf("share <= %v = %.4f, want %v", p[0], got, p[1])
		}
	}
	if mean := sumMid / float64(nMid); math.Abs(mean-2500.5) > 15 {
		t.Errorf("mean inside (1000, 4000] = %.1f, want 2500.5 (uniform)", mean)
	}
}

func TestBurstyArrivals(t *testing.T) {
	for _, cv2 := range []float64{0.25, 1, 4} {
		a, err := NewBurstyArrivals(10, cv2, rand.New(rand.NewPCG(5, 6)))
		if err != nil {
			t.Fatal(err)
		}
		const n = 100_000
		var sum, sum2 float64
		now := time.Duration(0)
		for range n {
			next := a.Next(now)
			g := (next - now).Seconds()
			sum += g
			sum2 += g * g
			now = next
		}
		mean := sum / n
		got := (sum2/n - mean*mean) / (mean * mean)
		if math.Abs(mean-0.1) > 0.002 || math.Abs(got-cv2)/cv2 > 0.05 {
			t.Errorf("burstiness %v: mean gap %.4f s (want 0.1), cv2 %.3f", cv2, mean, got)
		}
	}
	for _, bad := range []float64{0, -1, math.NaN(), 1000} {
		if _, err := NewBurstyArrivals(1, bad, nil); err == nil {
			t.Errorf("burstiness %v accepted", bad)
		}
	}
}

func TestSyntheticGenerate(t *testing.T) {
	s := Synthetic{CDF: CDF{{2000, 0.7}, {8000, 1}}, InputShare: 0.8, Mix: DefaultMix(), Rate: 20, Burstiness: 1}
	a, err := s.Generate(100*time.Second, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Generate(100*time.Second, rand.New(rand.NewPCG(1, 1)))
	if len(a) != len(b) || len(a) < 1800 || len(a) > 2200 {
		t.Fatalf("%d and %d requests in 100 s at 20/s", len(a), len(b))
	}
	var cats [3]int
	for i, r := range a {
		if r.Arrival != b[i].Arrival || r.InputTokens != b[i].InputTokens || r.Category != b[i].Category {
			t.Fatal("same seed gave different requests")
		}
		total := r.InputTokens + r.OutputTokens
		if total < 2 || total > 8000 || math.Abs(float64(r.InputTokens)-0.8*float64(total)) > 1 {
			t.Fatalf("request %+v: split is not 80/20", r)
		}
		cats[r.Category]++
	}
	if got := float64(cats[Code]) / float64(len(a)); math.Abs(got-0.25) > 0.04 {
		t.Errorf("code share %.3f, want 0.25", got)
	}
	s.InputShare = 1
	if _, err := s.Generate(time.Second, rand.New(rand.NewPCG(1, 1))); err == nil {
		t.Error("input share 1 accepted")
	}
}

func TestParseMix(t *testing.T) {
	m, err := ParseMix("prose=0.5, code=0.5")
	if err != nil || m != (Mix{0.5, 0.5, 0}) {
		t.Errorf("ParseMix = %v, %v", m, err)
	}
	for _, bad := range []string{"prose=0.5", "poetry=1", "prose", "prose=x,code=1", "prose=0.5,prose=0.5"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
		}
	}
	if Code.String() != "code" || Category(9).String() != "category(9)" {
		t.Error("category names")
	}
}

func TestRetime(t *testing.T) {
	reqs := []TraceRequest{{Arrival: 0}, {Arrival: time.Second}, {Arrival: 4 * time.Second}}
	out, err := Retime(reqs, 2)
	if err != nil {
		t.Fatal(err)
	}
	if out[1].Arrival != 250*time.Millisecond || out[2].Arrival != time.Second || reqs[2].Arrival != 4*time.Second {
		t.Errorf("retimed %v (original %v)", out, reqs)
	}
	if Rate(out) != 2 || Rate(reqs[:1]) != 0 {
		t.Errorf("rates %v %v", Rate(out), Rate(reqs[:1]))
	}
	if _, err := Retime(reqs, 0); err == nil {
		t.Error("rate 0 accepted")
	}
}
