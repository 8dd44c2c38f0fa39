package study

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
)

func TestCollapseFindsTheFirstFallPastThePeak(t *testing.T) {
	cell := func(rps, lo, hi float64) Cell {
		return Cell{Fleet: "homo", Policy: "p", RPS: rps, Seeds: 2, GoodputLo: lo, GoodputHi: hi}
	}
	tests := []struct {
		name  string
		curve []Cell
		want  []string
	}{
		{"tracks then collapses", []Cell{cell(250, 248, 250), cell(500, 490, 500), cell(750, 600, 640), cell(1000, 300, 400)},
			[]string{"p on homo: goodput tracks the rate (within 5%) up to 500 req/s", "peaks at 620.0 req/s of goodput at 750 req/s", "collapses at 1000 req/s (goodput 350.0, 56% of its peak)"}},
		{"plateau", []Cell{cell(250, 249, 251), cell(500, 450, 452), cell(750, 440, 444)},
			[]string{"up to 250 req/s;", "peaks at 451.0 req/s of goodput at 500 req/s", "holds at least 90% of it up to 750 req/s: no collapse."}},
		{"tracks to the top", []Cell{cell(250, 250, 250), cell(500, 499, 501)},
			[]string{"up to 500 req/s, the top of the sweep", ": no collapse."}},
		{"never tracks", []Cell{cell(250, 100, 120), cell(500, 50, 60)},
			[]string{"already below 95% of the rate at 250 req/s", "collapses at 500 req/s"}},
	}
	for _, tt := range tests {
		got := Collapse(tt.curve)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tt.name, got, w)
			}
		}
	}
	if Collapse(nil) != "" {
		t.Error("an empty curve has a sentence")
	}
}

func TestSweepSpecsAndErrors(t *testing.T) {
	specs, err := DefaultSweep().Specs()
	if err != nil {
		t.Fatal(err)
	}
	// 2 fleets x 3 policies x 6 rates x 2 seeds.
	if len(specs) != 72 || specs[0].Engine != "full" || specs[0].RPS != 250 || specs[len(specs)-1].RPS != 1100 {
		t.Errorf("%d specs from %+v to %+v, want 72 full-engine runs from 250 to 1100 req/s", len(specs), specs[0], specs[len(specs)-1])
	}
	o := DefaultSweep()
	o.Fleets = []string{"nowhere"}
	if _, err := o.Specs(); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("unknown fleet: err = %v", err)
	}
	o = DefaultSweep()
	o.Seeds = nil
	if _, err := o.Specs(); err == nil {
		t.Error("a sweep without seeds has no error")
	}
}

// TestSweepReport runs a tiny sweep and checks its table, chart, collapse
// sentences and files.
func TestSweepReport(t *testing.T) {
	o := SweepOptions{Fleets: []string{"small"}, Policies: []string{"waw", "pulsar-waw"}, Rates: []float64{5, 80},
		Seeds: []uint64{1, 2}, Engine: "full", Warmup: 20 * time.Second, Measure: 20 * time.Second}
	specs, err := o.Specs()
	if err != nil {
		t.Fatal(err)
	}
	runs, err := RunAll(context.Background(), specs, policy.NewRegistry(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Results{Study: "routing", Runs: runs[:1], Sweep: runs}
	tab := r.SweepTable()
	if len(tab.Rows) != 4 || !strings.Contains(tab.Title, "full engine") {
		t.Errorf("sweep table %q with %d rows, want the full engine and 4 rows", tab.Title, len(tab.Rows))
	}
	finds := r.SweepFindings()
	if len(finds) != 2 || !strings.HasPrefix(finds[0], "waw on small: ") || !strings.HasPrefix(finds[1], "pulsar-waw on small: ") {
		t.Errorf("findings = %q, want one sentence per policy", finds)
	}
	svg := r.SweepChart("small").SVG()
	for _, want := range []string{`class="identity"`, `class="range"`, "<polyline", "pulsar-waw"} {
		if !strings.Contains(svg, want) {
			t.Errorf("sweep chart lacks %s", want)
		}
	}
	dir := t.TempDir()
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	txt, err := os.ReadFile(filepath.Join(dir, "table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Sweep: goodput against nominal rate", finds[0], "Goodput against nominal rate, small"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if !strings.Contains(string(txt), "routing sweep, full engine") || !strings.Contains(string(txt), finds[1]) {
		t.Errorf("table.txt lacks the sweep section:\n%s", txt)
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"sweep": [`) {
		t.Error("results.json has no sweep")
	}
	// A study without a sweep writes no sweep section.
	var plain bytes.Buffer
	if err := (&Results{Study: "routing", Runs: runs[:1]}).WriteHTML(&plain); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "Sweep") {
		t.Error("a study without a sweep has a sweep section")
	}
}
