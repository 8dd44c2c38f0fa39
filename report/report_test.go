package report

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"io"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/internal/golden"
)

// checkGolden compares got with testdata/name, rewriting the file with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

func sampleTable() Table {
	return Table{
		Title:   "Latency by policy",
		Headers: []string{"policy", "rate", "p50", "p99", "SLO met", "note"},
		Rows: [][]string{
			{"round-robin", "2", "0.81s", "4.20s", "91.5%", "baseline"},
			{"least-loaded", "2", "0.64s", "2.95s", "97.25%", ""},
			{"prefix-affinity", "12.5", "0.4s", "12.75s", "100%", "best, \"cached\""},
		},
	}
}

func sampleBarChart() BarChart {
	return BarChart{
		Title:      "Goodput by request rate",
		XLabel:     "request rate (req/s)",
		YLabel:     "goodput (req/s)",
		Categories: []string{"2", "4", "8"},
		Series: []BarSeries{
			{Name: "round-robin", Bars: []Bar{{Value: 1.9, Lo: 1.8, Hi: 2, HasRange: true}, {Value: 3.5, Lo: 3.2, Hi: 3.7, HasRange: true}, {Value: 5.1, Lo: 4.6, Hi: 5.6, HasRange: true}}},
			{Name: "least-loaded", Bars: []Bar{{Value: 2}, {Value: 3.9}, {Value: 6.4}}},
			{Name: "prefix <affinity> & co", Bars: []Bar{{Value: 2, Lo: 2, Hi: 2, HasRange: true}, {Value: 4}, {Value: 7.3, Lo: 7.1, Hi: 7.6, HasRange: true}}},
		},
	}
}

func sampleScatterChart() ScatterChart {
	return ScatterChart{
		Title:  "p99 latency vs load",
		XLabel: "request rate (req/s)",
		YLabel: "p99 TTFT (s)",
		LogY:   true,
		Series: []ScatterSeries{
			{Name: "round-robin", Line: true, Points: []Point{{X: 2, Y: 0.3}, {X: 4, Y: 0.9}, {X: 8, Y: 14}}},
			{Name: "prefix-affinity", Line: true, Points: []Point{{X: 2, Y: 0.2}, {X: 4, Y: 0.45}, {X: 8, Y: 3.1, Label: "knee"}}},
			{Name: "oracle", Points: []Point{{X: 6, Y: 0.5}}},
		},
	}
}

// sampleSweepChart is goodput against rate: seed midpoints joined, seed
// ranges as bars and goodput = rate dotted.
func sampleSweepChart() ScatterChart {
	return ScatterChart{
		Title:    "goodput vs nominal rate",
		XLabel:   "nominal rate (req/s)",
		YLabel:   "goodput (req/s)",
		Identity: true,
		Series: []ScatterSeries{
			{Name: "pulsar-waw", Line: true, Points: []Point{{X: 250, Y: 249, Lo: 247, Hi: 251, HasRange: true}, {X: 500, Y: 480, Lo: 470, Hi: 490, HasRange: true}}},
			{Name: "waw", Line: true, Points: []Point{{X: 250, Y: 248}, {X: 500, Y: 300, Lo: 200, Hi: 400, HasRange: true}}},
		},
	}
}

func TestGoldenSweepChart(t *testing.T) {
	svg := sampleSweepChart().SVG()
	for _, want := range []string{`class="identity"`, `stroke-dasharray`, `class="range"`, "<polyline"} {
		if !strings.Contains(svg, want) {
			t.Errorf("sweep chart lacks %s", want)
		}
	}
	checkGolden(t, "sweep.svg.golden", []byte(svg))
}

func TestGoldenTableText(t *testing.T) {
	var b bytes.Buffer
	if err := sampleTable().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "table.txt.golden", b.Bytes())
}

func TestGoldenBarChart(t *testing.T) {
	checkGolden(t, "bar.svg.golden", []byte(sampleBarChart().SVG()))
}

func TestGoldenScatterChart(t *testing.T) {
	checkGolden(t, "scatter.svg.golden", []byte(sampleScatterChart().SVG()))
}

func TestGoldenPage(t *testing.T) {
	p := NewPage("Stargate report")
	p.Heading("Summary")
	p.Paragraph("Three policies at three request rates; ranges are min..max over 3 seeds.")
	p.Table(sampleTable())
	p.Heading("Charts")
	p.Chart(sampleBarChart().SVG())
	p.Chart(sampleScatterChart().SVG())
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "page.html.golden", b.Bytes())
}

func TestWriteTextAlignment(t *testing.T) {
	tab := Table{
		Title:   "T",
		Headers: []string{"name", "value", "share"},
		Rows: [][]string{
			{"a", "1.5", "12%"},
			{"longer-name", "100", "3%"},
			{"x", "-", "0.25s"},
			{"short"},
		},
	}
	var b strings.Builder
	if err := tab.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "T\n" +
		"name         value  share\n" +
		"-----------  -----  -----\n" +
		"a              1.5    12%\n" +
		"longer-name    100     3%\n" +
		"x            -      0.25s\n" +
		"short\n"
	if b.String() != want {
		t.Errorf("WriteText:\ngot:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWriteTextNoTitleNoHeaders(t *testing.T) {
	var b strings.Builder
	if err := (Table{Rows: [][]string{{"ab", "1"}, {"c", "22"}}}).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "ab   1\nc   22\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	if err := (Table{}).WriteText(&b); err != nil || b.String() != "" {
		t.Errorf("empty table: got %q, %v", b.String(), err)
	}
}

func TestIsNumeric(t *testing.T) {
	for cell, want := range map[string]bool{
		"1": true, "-2.5": true, "1e3": true, " 7 ": true, "12.5%": true, "0.25s": true,
		"": false, "%": false, "s": false, "abc": false, "12ms": false, "1%%": false, "1s%": false, "-": false,
	} {
		if got := isNumeric(cell); got != want {
			t.Errorf("isNumeric(%q) = %v, want %v", cell, got, want)
		}
	}
}

func TestCSVRoundTrip(t *testing.T) {
	tab := sampleTable()
	tab.Rows = append(tab.Rows, []string{"multi\nline", "1,000", `"quoted"`}) // short row: padded
	var b bytes.Buffer
	if err := tab.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	got, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{tab.Headers}
	want = append(want, tab.Rows[:3]...)
	want = append(want, []string{"multi\nline", "1,000", `"quoted"`, "", "", ""})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\ngot  %q\nwant %q", got, want)
	}
}

func TestWriteMarkdown(t *testing.T) {
	tab := Table{Title: "not written", Headers: []string{"policy", "rate"},
		Rows: [][]string{{"a|b", "1.5"}, {"two\nlines", "20"}, {"short"}}}
	var b bytes.Buffer
	if err := tab.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	want := "| policy | rate |\n|---|---:|\n| a\\|b | 1.5 |\n| two lines | 20 |\n| short |  |\n"
	if b.String() != want {
		t.Errorf("WriteMarkdown:\ngot:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := (Table{}).WriteMarkdown(&b); err != nil || b.Len() != 0 {
		t.Errorf("empty table: %q, %v", b.String(), err)
	}
	if err := tab.WriteMarkdown(failWriter{}); err == nil {
		t.Error("WriteMarkdown: want error")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("boom") }

func TestWriteErrors(t *testing.T) {
	tab := sampleTable()
	if err := tab.WriteText(failWriter{}); err == nil {
		t.Error("WriteText: want error")
	}
	if err := tab.WriteCSV(failWriter{}); err == nil {
		t.Error("WriteCSV: want error")
	}
	if err := NewPage("x").Write(failWriter{}); err == nil {
		t.Error("Page.Write: want error")
	}
}

func TestPageEscaping(t *testing.T) {
	const evil = `<script>alert("x")</script>`
	p := NewPage(evil)
	p.Heading(evil)
	p.Paragraph("a < b & " + evil)
	p.Table(Table{Title: evil, Headers: []string{evil}, Rows: [][]string{{evil}}})
	p.Chart(BarChart{Title: evil, Categories: []string{evil}, Series: []BarSeries{{Name: evil, Bars: []Bar{{Value: 1}}}}}.SVG())
	p.Chart(ScatterChart{Title: evil, XLabel: evil, YLabel: evil, Series: []ScatterSeries{{Name: evil, Points: []Point{{X: 1, Y: 1, Label: evil}}}}}.SVG())
	var b strings.Builder
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(strings.ToLower(out), "<script") {
		t.Errorf("page contains an unescaped <script> tag:\n%s", out)
	}
	if !strings.Contains(out, "<title>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</title>") {
		t.Errorf("page title not escaped as expected:\n%s", out)
	}
	if !strings.Contains(out, "<p>a &lt; b &amp; &lt;script&gt;") {
		t.Errorf("paragraph not escaped:\n%s", out)
	}
}

func TestPageTableNumericCells(t *testing.T) {
	p := NewPage("")
	p.Table(Table{Headers: []string{"name", "n"}, Rows: [][]string{{"a", "1.5"}, {"b"}}})
	var b strings.Builder
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`<thead><tr><th>name</th><th class="num">n</th></tr></thead>`,
		`<tr><td>a</td><td class="num">1.5</td></tr>`,
		`<tr><td>b</td><td></td></tr>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<h1>") {
		t.Error("untitled page has an h1")
	}
}

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 437, 5, []float64{0, 100, 200, 300, 400, 500}},
		{0, 1, 5, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{0, 7, 5, []float64{0, 2, 4, 6, 8}},
		{0, 12, 5, []float64{0, 2.5, 5, 7.5, 10, 12.5}},
		{0, 100, 5, []float64{0, 20, 40, 60, 80, 100}},
		{-3, 7, 5, []float64{-4, -2, 0, 2, 4, 6, 8}},
		{-437, 0, 5, []float64{-500, -400, -300, -200, -100, 0}},
		{0.013, 0.048, 5, []float64{0.01, 0.02, 0.03, 0.04, 0.05}},
		{1000, 5000, 4, []float64{1000, 2000, 3000, 4000, 5000}},
		{0, 0, 5, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{4, 4, 4, []float64{2, 3, 4, 5, 6}},
		{7, 0, 5, []float64{0, 2, 4, 6, 8}},
		{math.NaN(), 3, 5, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{0, math.Inf(1), 5, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{-math.MaxFloat64, math.MaxFloat64, 5, []float64{-math.MaxFloat64, math.MaxFloat64}},
		{math.MaxFloat64, math.MaxFloat64, 5, []float64{math.MaxFloat64}},
	}
	for _, tt := range tests {
		got := niceTicks(tt.lo, tt.hi, tt.n)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("niceTicks(%v, %v, %d) = %v, want %v", tt.lo, tt.hi, tt.n, got, tt.want)
		}
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{
		0.7: 1, 1: 1, 1.01: 2, 2.2: 2.5, 3: 5, 6: 10, 87.4: 100, 0.03: 0.05, 0: 1, -3: 1,
	} {
		if got := niceStep(raw); math.Abs(got-want) > 1e-12*want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
}

func TestTickLabels(t *testing.T) {
	tests := []struct {
		ticks []float64
		want  []string
	}{
		{niceTicks(0, 1, 5), []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{niceTicks(0, 12, 5), []string{"0.0", "2.5", "5.0", "7.5", "10.0", "12.5"}},
		{niceTicks(-0.3, 0.3, 5), []string{"-0.4", "-0.2", "0.0", "0.2", "0.4"}},
		{niceTicks(0, 437, 5), []string{"0", "100", "200", "300", "400", "500"}},
		{niceTicks(0, 4e6, 4), []string{"0", "1e+06", "2e+06", "3e+06", "4e+06"}},
	}
	for _, tt := range tests {
		if got := tickLabels(tt.ticks); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("tickLabels(%v) = %q, want %q", tt.ticks, got, tt.want)
		}
	}
}

func TestLogTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []string
	}{
		{0.3, 14, []string{"0.1", "1", "10", "100"}},
		{1, 1000, []string{"1", "10", "100", "1000"}},
		{5, 5, []string{"1", "10"}},
		{0.001, 0.002, []string{"0.001", "0.01"}},
		{1e-3, 1e15, []string{"0.001", "1", "1000", "1e+06", "1e+09", "1e+12", "1e+15"}},
		{math.SmallestNonzeroFloat64, math.MaxFloat64, []string{"1e-240", "1e-180", "1e-120", "1e-60", "1", "1e+60", "1e+120", "1e+180", "1e+240"}},
	}
	for _, tt := range tests {
		if got := logLabels(logTicks(tt.lo, tt.hi)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("logTicks(%v, %v) = %q, want %q", tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestBarChartYRangeIncludesZero(t *testing.T) {
	tests := []struct {
		name   string
		bars   []Bar
		lo, hi float64
		ok     bool
	}{
		{"positive", []Bar{{Value: 5}, {Value: 9}}, 0, 9, true},
		{"negative", []Bar{{Value: -5}, {Value: -2}}, -5, 0, true},
		{"range beyond value", []Bar{{Value: 5, Lo: 6, Hi: 3, HasRange: true}}, 0, 6, true},
		{"range ignored without HasRange", []Bar{{Value: 5, Lo: -1, Hi: 30}}, 0, 5, true},
		{"non-finite skipped", []Bar{{Value: math.NaN()}, {Value: math.Inf(1)}}, 0, 0, false},
	}
	for _, tt := range tests {
		c := BarChart{Categories: []string{"a", "b"}, Series: []BarSeries{{Bars: tt.bars}}}
		lo, hi, ok := c.yRange()
		if lo != tt.lo || hi != tt.hi || ok != tt.ok {
			t.Errorf("%s: yRange = %v, %v, %v, want %v, %v, %v", tt.name, lo, hi, ok, tt.lo, tt.hi, tt.ok)
		}
	}
	// The first tick label of the y axis is 0 for positive data.
	svg := BarChart{Categories: []string{"a"}, Series: []BarSeries{{Bars: []Bar{{Value: 437}}}}}.SVG()
	if !strings.Contains(svg, `text-anchor="end" dominant-baseline="middle">0</text>`) ||
		!strings.Contains(svg, `dominant-baseline="middle">500</text>`) {
		t.Errorf("y axis should run 0..500:\n%s", svg)
	}
}

// checkSVG parses svg as XML, requires an svg root element, and rejects NaN
// and Inf anywhere in the output.
func checkSVG(t *testing.T, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	for _, bad := range []string{"NaN", "Inf", "inf"} {
		if strings.Contains(svg, bad) {
			t.Errorf("output contains %q:\n%s", bad, svg)
		}
	}
	if !strings.Contains(svg, `viewBox="0 0 720 360"`) {
		t.Error("missing viewBox")
	}
}

func TestBarChartSVGWellFormed(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := map[string]BarChart{
		"sample":           sampleBarChart(),
		"zero value":       {},
		"no series":        {Title: "t", Categories: []string{"a", "b"}},
		"empty categories": {Series: []BarSeries{{Name: "s", Bars: []Bar{{Value: 1}}}}},
		"all zero":         {Categories: []string{"a", "b"}, Series: []BarSeries{{Name: "s", Bars: []Bar{{}, {}}}}},
		"single":           {Categories: []string{"a"}, Series: []BarSeries{{Name: "s", Bars: []Bar{{Value: 3}}}}},
		"negative":         {Categories: []string{"a", "b"}, Series: []BarSeries{{Name: "s", Bars: []Bar{{Value: -3, Lo: -4, Hi: -1, HasRange: true}, {Value: 2}}}}},
		"non-finite": {Categories: []string{"a", "b", "c"}, Series: []BarSeries{
			{Name: "s", Bars: []Bar{{Value: nan}, {Value: inf, Lo: 1, Hi: 2, HasRange: true}, {Value: 1, Lo: nan, Hi: inf, HasRange: true}}},
			{Name: "t", Bars: []Bar{{Value: -inf}}},
		}},
		"only non-finite": {Categories: []string{"a"}, Series: []BarSeries{{Name: "s", Bars: []Bar{{Value: nan}}}}},
		"ragged":          {Categories: []string{"a", "b"}, Series: []BarSeries{{Name: "short", Bars: []Bar{{Value: 1}}}, {Name: "long", Bars: []Bar{{Value: 1}, {Value: 2}, {Value: 3}}}}},
		"float64 limits":  {Categories: []string{"a", "b"}, Series: []BarSeries{{Name: "s", Bars: []Bar{{Value: math.MaxFloat64}, {Value: -math.MaxFloat64, Lo: -math.MaxFloat64, Hi: math.MaxFloat64, HasRange: true}}}}},
		"huge and tiny":   {Categories: []string{"a", "b"}, Series: []BarSeries{{Name: "s", Bars: []Bar{{Value: 1e300}, {Value: 1e-300}}}}},
		"many series":     {Categories: []string{"a"}, Series: manyBarSeries(12)},
		"escaping":        {Title: `a<b>&"c"'d'`, XLabel: "<x>", YLabel: "&y", Categories: []string{"<c>"}, Series: []BarSeries{{Name: "]]>", Bars: []Bar{{Value: 1}}}}},
	}
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		c := tests[name]
		t.Run(name, func(t *testing.T) {
			svg := c.SVG()
			checkSVG(t, svg)
			if svg != c.SVG() {
				t.Error("output is not deterministic")
			}
		})
	}
}

func manyBarSeries(n int) []BarSeries {
	s := make([]BarSeries, n)
	for i := range s {
		s[i] = BarSeries{Name: strings.Repeat("x", i*3), Bars: []Bar{{Value: float64(i)}}}
	}
	return s
}

func TestScatterChartSVGWellFormed(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := map[string]ScatterChart{
		"sample":           sampleScatterChart(),
		"zero value":       {},
		"no points":        {Series: []ScatterSeries{{Name: "s", Line: true}}},
		"single point":     {Series: []ScatterSeries{{Name: "s", Line: true, Points: []Point{{X: 3, Y: 4, Label: "only"}}}}},
		"single point log": {LogY: true, Series: []ScatterSeries{{Name: "s", Points: []Point{{X: 0, Y: 4}}}}},
		"all zero":         {Series: []ScatterSeries{{Name: "s", Line: true, Points: []Point{{}, {}}}}},
		"negative":         {Series: []ScatterSeries{{Name: "s", Line: true, Points: []Point{{X: -5, Y: -2}, {X: 3, Y: -7}}}}},
		"non-finite": {Series: []ScatterSeries{{Name: "s", Line: true, Points: []Point{
			{X: nan, Y: 1}, {X: 1, Y: inf}, {X: 2, Y: 3}, {X: -inf, Y: -inf}, {X: 4, Y: 5},
		}}}},
		"log non-positive":     {LogY: true, Series: []ScatterSeries{{Name: "s", Line: true, Points: []Point{{X: 1, Y: 0}, {X: 2, Y: -1}, {X: 3, Y: 10}}}}},
		"log float64 limits":   {LogY: true, Series: []ScatterSeries{{Name: "s", Line: true, Points: []Point{{X: 1, Y: math.MaxFloat64}, {X: 2, Y: math.SmallestNonzeroFloat64}, {X: 3, Y: 1}}}}},
		"log all non-positive": {LogY: true, Series: []ScatterSeries{{Name: "s", Points: []Point{{X: 1, Y: 0}, {X: 2, Y: -1}}}}},
		"huge":                 {Series: []ScatterSeries{{Name: "s", Points: []Point{{X: -1e300, Y: 1e300}, {X: 1e300, Y: -1e300}}}}},
		"escaping":             {Title: "<t>", XLabel: "&", YLabel: `"`, Series: []ScatterSeries{{Name: "<s>", Points: []Point{{X: 1, Y: 2, Label: "<&>"}}}}},
	}
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		c := tests[name]
		t.Run(name, func(t *testing.T) {
			svg := c.SVG()
			checkSVG(t, svg)
			if svg != c.SVG() {
				t.Error("output is not deterministic")
			}
		})
	}
}

func TestScatterSkipsInvalidPoints(t *testing.T) {
	c := ScatterChart{LogY: true, Series: []ScatterSeries{{Name: "s", Line: true, Points: []Point{
		{X: 1, Y: 0}, {X: 2, Y: -1}, {X: 3, Y: 10}, {X: math.NaN(), Y: 5}, {X: 4, Y: 100},
	}}}}
	svg := c.SVG()
	if n := strings.Count(svg, `class="point"`); n != 2 {
		t.Errorf("drew %d points, want 2", n)
	}
	if n := strings.Count(svg, "<polyline"); n != 1 {
		t.Errorf("drew %d lines, want 1", n)
	}
	// The log axis spans the valid points only: 10 and 100.
	if !strings.Contains(svg, ">10</text>") || !strings.Contains(svg, ">100</text>") || strings.Contains(svg, ">1</text>") {
		t.Errorf("unexpected log axis:\n%s", svg)
	}
}

func TestBarChartDrawsBars(t *testing.T) {
	svg := sampleBarChart().SVG()
	if n := strings.Count(svg, `class="bar"`); n != 9 {
		t.Errorf("drew %d bars, want 9", n)
	}
	if n := strings.Count(svg, `class="range"`); n != 5 {
		t.Errorf("drew %d error bars, want 5", n)
	}
	if strings.Contains(svg, "no data") {
		t.Error("chart with data says no data")
	}
	empty := BarChart{Categories: []string{"a"}}.SVG()
	if !strings.Contains(empty, "no data") {
		t.Error("empty chart lacks the no data note")
	}
}
