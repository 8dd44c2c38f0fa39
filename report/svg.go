package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Chart geometry in SVG user units. Every chart has the same fixed size; the
// legend sits in the right margin.
const (
	chartWidth   = 720
	chartHeight  = 360
	plotLeft     = 64
	plotRight    = chartWidth - 176
	plotTop      = 40
	plotBottom   = chartHeight - 56
	legendX      = plotRight + 16
	legendMaxLen = 20 // runes of a legend entry before it is shortened
)

// palette is the Okabe-Ito colour-blind friendly palette, ordered so that the
// low-contrast yellow comes late. Series beyond its length reuse colours.
var palette = []string{
	"#0072B2", // blue
	"#E69F00", // orange
	"#009E73", // bluish green
	"#D55E00", // vermillion
	"#56B4E9", // sky blue
	"#CC79A7", // reddish purple
	"#F0E442", // yellow
	"#000000", // black
}

// seriesColor returns the palette colour of series i.
func seriesColor(i int) string { return palette[i%len(palette)] }

// esc escapes text for XML and HTML content and attribute values.
func esc(s string) string { return html.EscapeString(s) }

// num formats a coordinate with at most two decimals. Non-finite values, which
// the charts never produce on purpose, become 0 so the output stays valid.
func num(v float64) string {
	if !finite(v) {
		v = 0
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	return trimZero(strings.TrimSuffix(s, "."))
}

// shorten cuts s to legendMaxLen runes, ending it with an ellipsis if cut.
func shorten(s string) string {
	if utf8.RuneCountInString(s) <= legendMaxLen {
		return s
	}
	r := []rune(s)
	return string(r[:legendMaxLen-1]) + "…"
}

// axis maps data values to one direction of the plot area.
type axis struct {
	ticks  []float64 // tick values, ascending
	labels []string  // one label per tick
	log    bool      // ticks and values are mapped on a log10 scale
	p0, p1 float64   // pixel positions of the first and last tick
}

// linearAxis returns a linear axis covering [lo, hi] with nice ticks.
func linearAxis(lo, hi float64, n int, p0, p1 float64) axis {
	t := niceTicks(lo, hi, n)
	return axis{ticks: t, labels: tickLabels(t), p0: p0, p1: p1}
}

// logAxis returns a log10 axis covering [lo, hi], which must be positive.
func logAxis(lo, hi float64, p0, p1 float64) axis {
	t := logTicks(lo, hi)
	return axis{ticks: t, labels: logLabels(t), log: true, p0: p0, p1: p1}
}

// pos returns the pixel position of value v.
func (a axis) pos(v float64) float64 {
	lo, hi := a.ticks[0], a.ticks[len(a.ticks)-1]
	if a.log {
		v, lo, hi = math.Log10(v), math.Log10(lo), math.Log10(hi)
	}
	if !(hi > lo) {
		return a.p0
	}
	// Halved so that spans near the float64 limits do not overflow.
	return a.p0 + (v/2-lo/2)/(hi/2-lo/2)*(a.p1-a.p0)
}

// clamp limits v to the span of the axis, so values beyond the reach of a
// log axis stay inside the plot area.
func (a axis) clamp(v float64) float64 {
	return math.Max(a.ticks[0], math.Min(a.ticks[len(a.ticks)-1], v))
}

// svgWriter accumulates the elements of one chart.
type svgWriter struct{ b strings.Builder }

func (s *svgWriter) printf(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// begin opens the svg element and draws the background and title.
func (s *svgWriter) begin(title string) {
	s.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12" role="img">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	if title != "" {
		s.printf("<title>%s</title>\n", esc(title))
	}
	s.printf(`<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, chartHeight)
	if title != "" {
		s.printf(`<text x="%s" y="24" text-anchor="middle" font-size="15" font-weight="bold">%s</text>`+"\n",
			num(chartWidth/2), esc(title))
	}
}

// yAxis draws horizontal grid lines, tick labels and the rotated y label.
func (s *svgWriter) yAxis(y axis, label string) {
	s.printf(`<g class="y-axis">` + "\n")
	for i, t := range y.ticks {
		p := num(y.pos(t))
		s.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#e0e0e0"/>`+"\n", plotLeft, p, plotRight, p)
		s.printf(`<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", plotLeft-6, p, esc(y.labels[i]))
	}
	s.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333333"/>`+"\n", plotLeft, plotTop, plotLeft, plotBottom)
	if label != "" {
		cy := num((plotTop + plotBottom) / 2.0)
		s.printf(`<text x="16" y="%s" text-anchor="middle" transform="rotate(-90 16 %s)">%s</text>`+"\n", cy, cy, esc(label))
	}
	s.printf("</g>\n")
}

// xAxisLine draws the x axis line at the bottom of the plot and the x label.
func (s *svgWriter) xAxisLine(label string) {
	s.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333333"/>`+"\n", plotLeft, plotBottom, plotRight, plotBottom)
	if label != "" {
		s.printf(`<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num((plotLeft+plotRight)/2.0), chartHeight-10, esc(label))
	}
}

// noData writes a note in the middle of an empty plot area.
func (s *svgWriter) noData() {
	s.printf(`<text x="%s" y="%s" text-anchor="middle" fill="#777777">no data</text>`+"\n",
		num((plotLeft+plotRight)/2.0), num((plotTop+plotBottom)/2.0))
}

// legendEntry is one line of a legend; draw draws its symbol centred at (x, y).
type legendEntry struct {
	name string
	draw func(s *svgWriter, x, y float64)
}

// legend draws entries top-down in the right margin.
func (s *svgWriter) legend(entries []legendEntry) {
	if len(entries) == 0 {
		return
	}
	s.printf(`<g class="legend">` + "\n")
	for i, e := range entries {
		y := float64(plotTop + 6 + 18*i)
		e.draw(s, legendX+8, y)
		s.printf(`<text x="%s" y="%s" dominant-baseline="middle">%s<title>%s</title></text>`+"\n",
			num(legendX+22), num(y), esc(shorten(e.name)), esc(e.name))
	}
	s.printf("</g>\n")
}

// end closes the svg element and returns the document.
func (s *svgWriter) end() string {
	s.printf("</svg>\n")
	return s.b.String()
}

// marker draws the point symbol of series i centred at (x, y): circle,
// square, diamond and triangle in turn, so series differ by shape as well as
// colour. tip, when non-empty, becomes a tooltip.
func (s *svgWriter) marker(i int, x, y float64, class, tip string) {
	const r = 4.0
	color := seriesColor(i)
	cls := ""
	if class != "" {
		cls = fmt.Sprintf(` class="%s"`, class)
	}
	var open, tag string
	switch i % 4 {
	case 0:
		open, tag = fmt.Sprintf(`<circle%s cx="%s" cy="%s" r="%s" fill="%s"`, cls, num(x), num(y), num(r), color), "circle"
	case 1:
		open, tag = fmt.Sprintf(`<rect%s x="%s" y="%s" width="%s" height="%s" fill="%s"`, cls, num(x-r), num(y-r), num(2*r), num(2*r), color), "rect"
	case 2:
		d := r * 1.3
		open, tag = fmt.Sprintf(`<polygon%s points="%s,%s %s,%s %s,%s %s,%s" fill="%s"`, cls,
			num(x), num(y-d), num(x+d), num(y), num(x), num(y+d), num(x-d), num(y), color), "polygon"
	default:
		d := r * 1.2
		open, tag = fmt.Sprintf(`<polygon%s points="%s,%s %s,%s %s,%s" fill="%s"`, cls,
			num(x), num(y-d), num(x+d), num(y+d*0.8), num(x-d), num(y+d*0.8), color), "polygon"
	}
	if tip == "" {
		s.printf("%s/>\n", open)
		return
	}
	s.printf("%s><title>%s</title></%s>\n", open, esc(tip), tag)
}
