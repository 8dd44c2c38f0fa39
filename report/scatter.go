package report

import (
	"math"
	"strings"
)

// Point is one point of a ScatterChart. A non-empty Label is written next to
// the point.
type Point struct {
	X, Y  float64
	Label string
	// With HasRange a vertical bar is drawn from Lo to Hi (a range over
	// seeds, say).
	Lo, Hi   float64
	HasRange bool
}

// ScatterSeries is one series of a ScatterChart. When Line is set its points
// are joined in the order given (sort them by X first for a curve).
type ScatterSeries struct {
	Name   string
	Points []Point
	Line   bool
}

// ScatterChart draws points per series on a linear x axis and a linear or,
// with LogY, base-10 logarithmic y axis.
type ScatterChart struct {
	Title, XLabel, YLabel string
	Series                []ScatterSeries
	LogY                  bool
	// Identity draws y = x as a dotted line over the x range (goodput
	// against offered rate, say).
	Identity bool
}

// valid reports whether p can be drawn: both coordinates finite and, on a
// log axis, Y positive.
func (c ScatterChart) valid(p Point) bool {
	return finite(p.X) && finite(p.Y) && (!c.LogY || p.Y > 0)
}

// ranges returns the extent of the drawable points and whether there is one.
func (c ScatterChart) ranges() (x0, x1, y0, y1 float64, ok bool) {
	x0, y0 = math.Inf(1), math.Inf(1)
	x1, y1 = math.Inf(-1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if c.valid(p) {
				ok = true
				x0, x1 = math.Min(x0, p.X), math.Max(x1, p.X)
				y0, y1 = math.Min(y0, p.Y), math.Max(y1, p.Y)
				if p.HasRange && c.valid(Point{X: p.X, Y: p.Lo}) && c.valid(Point{X: p.X, Y: p.Hi}) {
					y0, y1 = math.Min(y0, p.Lo), math.Max(y1, p.Hi)
				}
			}
		}
	}
	if !ok {
		return 0, 1, 0, 1, false
	}
	if c.Identity && (!c.LogY || x0 > 0) {
		y0, y1 = math.Min(y0, x0), math.Max(y1, x1)
	}
	return x0, x1, y0, y1, true
}

// SVG renders the chart as a standalone SVG document. Points with a NaN or
// infinite coordinate are skipped, and so are points with Y <= 0 when LogY is
// set; a line skips them too and joins the points around them.
func (c ScatterChart) SVG() string {
	var s svgWriter
	s.begin(c.Title)
	x0, x1, y0, y1, ok := c.ranges()
	x := linearAxis(x0, x1, 6, plotLeft, plotRight)
	var y axis
	if c.LogY {
		y = logAxis(y0, y1, plotBottom, plotTop)
	} else {
		y = linearAxis(y0, y1, 5, plotBottom, plotTop)
	}
	s.yAxis(y, c.YLabel)
	s.printf(`<g class="x-axis">` + "\n")
	for i, t := range x.ticks {
		p := num(x.pos(t))
		s.printf(`<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#e0e0e0"/>`+"\n", p, plotTop, p, plotBottom)
		s.printf(`<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", p, plotBottom+16, esc(x.labels[i]))
	}
	s.xAxisLine(c.XLabel)
	s.printf("</g>\n")
	if !ok {
		s.noData()
	}

	if ok && c.Identity && (!c.LogY || x0 > 0) {
		s.printf(`<line class="identity" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#888888" stroke-width="1" stroke-dasharray="2,3"/>`+"\n",
			num(x.pos(x0)), num(y.pos(y.clamp(x0))), num(x.pos(x1)), num(y.pos(y.clamp(x1))))
	}
	for si, ser := range c.Series {
		color := seriesColor(si)
		s.printf(`<g class="series">` + "\n")
		for _, p := range ser.Points {
			if p.HasRange && c.valid(p) && c.valid(Point{X: p.X, Y: p.Lo}) && c.valid(Point{X: p.X, Y: p.Hi}) {
				px := num(x.pos(p.X))
				s.printf(`<line class="range" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1"/>`+"\n",
					px, num(y.pos(y.clamp(p.Lo))), px, num(y.pos(y.clamp(p.Hi))), color)
			}
		}
		if ser.Line {
			var pts []string
			for _, p := range ser.Points {
				if c.valid(p) {
					pts = append(pts, num(x.pos(p.X))+","+num(y.pos(y.clamp(p.Y))))
				}
			}
			if len(pts) > 1 {
				s.printf(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(pts, " "), color)
			}
		}
		for _, p := range ser.Points {
			if !c.valid(p) {
				continue
			}
			px, py := x.pos(p.X), y.pos(y.clamp(p.Y))
			tip := ser.Name + ": (" + formatValue(p.X) + ", " + formatValue(p.Y) + ")"
			if p.Label != "" {
				tip = p.Label + " - " + tip
			}
			s.marker(si, px, py, "point", tip)
			if p.Label != "" {
				s.printf(`<text x="%s" y="%s" font-size="10" fill="#333333">%s</text>`+"\n", num(px+6), num(py-6), esc(p.Label))
			}
		}
		s.printf("</g>\n")
	}

	entries := make([]legendEntry, len(c.Series))
	for i, ser := range c.Series {
		color, line := seriesColor(i), ser.Line
		entries[i] = legendEntry{name: ser.Name, draw: func(s *svgWriter, px, py float64) {
			if line {
				s.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5"/>`+"\n",
					num(px-8), num(py), num(px+8), num(py), color)
			}
			s.marker(i, px, py, "", "")
		}}
	}
	s.legend(entries)
	return s.end()
}
