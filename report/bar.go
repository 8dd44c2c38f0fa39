package report

import "math"

// Bar is one bar of a BarChart: a value and, when HasRange is set, a [Lo, Hi]
// range drawn as an error bar (for example the range over seeds).
type Bar struct {
	Value, Lo, Hi float64
	HasRange      bool
}

// BarSeries is one series of a BarChart (for example a policy). Bars[i]
// belongs to Categories[i]; missing bars are not drawn and extra ones are
// ignored.
type BarSeries struct {
	Name string
	Bars []Bar
}

// BarChart draws grouped bars: one group per category (for example a request
// rate) and one bar per series in each group, in series order.
type BarChart struct {
	Title, XLabel, YLabel string
	Categories            []string
	Series                []BarSeries
}

// bars calls f for every bar that belongs to a category and has a finite
// value, with its series and category index.
func (c BarChart) bars(f func(s, i int, b Bar)) {
	for s, ser := range c.Series {
		for i, b := range ser.Bars {
			if i < len(c.Categories) && finite(b.Value) {
				f(s, i, b)
			}
		}
	}
}

// errorRange returns the ordered error bar of b and whether it is drawn.
func errorRange(b Bar) (lo, hi float64, ok bool) {
	if !b.HasRange || !finite(b.Lo) || !finite(b.Hi) {
		return 0, 0, false
	}
	return math.Min(b.Lo, b.Hi), math.Max(b.Lo, b.Hi), true
}

// yRange returns the span of the values and error bars to draw, always
// including 0, and whether there is any bar to draw.
func (c BarChart) yRange() (lo, hi float64, ok bool) {
	c.bars(func(_, _ int, b Bar) {
		ok = true
		lo, hi = math.Min(lo, b.Value), math.Max(hi, b.Value)
		if l, h, has := errorRange(b); has {
			lo, hi = math.Min(lo, l), math.Max(hi, h)
		}
	})
	return lo, hi, ok
}

// SVG renders the chart as a standalone SVG document. The y axis always
// includes 0 and bars grow from 0, so negative values point down. NaN and
// infinite values are skipped, as are error bars with a non-finite end.
func (c BarChart) SVG() string {
	var s svgWriter
	s.begin(c.Title)
	lo, hi, ok := c.yRange()
	y := linearAxis(lo, hi, 5, plotBottom, plotTop)
	s.yAxis(y, c.YLabel)

	n, m := len(c.Categories), len(c.Series)
	group := float64(plotRight-plotLeft) / float64(max(n, 1))
	barW := group * 0.8 / float64(max(m, 1))
	for i, cat := range c.Categories {
		x := plotLeft + group*(float64(i)+0.5)
		s.printf(`<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(x), plotBottom+16, esc(cat))
	}

	s.printf(`<g class="bars">` + "\n")
	zero := y.pos(0)
	c.bars(func(si, i int, b Bar) {
		x := plotLeft + group*(float64(i)+0.1) + barW*float64(si)
		v := y.pos(b.Value)
		top, h := math.Min(v, zero), math.Abs(v-zero)
		tip := c.Series[si].Name + " / " + c.Categories[i] + ": " + formatValue(b.Value)
		l, u, has := errorRange(b)
		if has {
			tip += " [" + formatValue(l) + ", " + formatValue(u) + "]"
		}
		s.printf(`<rect class="bar" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
			num(x), num(top), num(barW), num(h), seriesColor(si), esc(tip))
		if has {
			cx, cap := x+barW/2, math.Min(barW*0.25, 6)
			pl, pu := num(y.pos(l)), num(y.pos(u))
			s.printf(`<path class="range" d="M%s %sV%sM%s %sH%sM%s %sH%s" stroke="#333333" stroke-width="1.2" fill="none"/>`+"\n",
				num(cx), pl, pu,
				num(cx-cap), pl, num(cx+cap),
				num(cx-cap), pu, num(cx+cap))
		}
	})
	s.printf("</g>\n")
	if lo < 0 {
		p := num(zero)
		s.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#333333"/>`+"\n", plotLeft, p, plotRight, p)
	}
	s.xAxisLine(c.XLabel)
	if !ok {
		s.noData()
	}

	entries := make([]legendEntry, len(c.Series))
	for i, ser := range c.Series {
		color := seriesColor(i)
		entries[i] = legendEntry{name: ser.Name, draw: func(s *svgWriter, x, y float64) {
			s.printf(`<rect x="%s" y="%s" width="12" height="12" fill="%s"/>`+"\n", num(x-6), num(y-6), color)
		}}
	}
	s.legend(entries)
	return s.end()
}
