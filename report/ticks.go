package report

import (
	"math"
	"strconv"
	"strings"
)

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// niceStep returns the smallest step of the form 1, 2, 2.5 or 5 times a power
// of ten that is at least raw (1 when raw is not a positive finite number).
func niceStep(raw float64) float64 {
	if !(raw > 0) || !finite(raw) {
		return 1
	}
	base := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*base >= raw*(1-1e-9) {
			return m * base
		}
	}
	return 10 * base
}

// niceTicks returns evenly spaced tick values with a nice step (see niceStep)
// that cover [lo, hi] with at most about n intervals. The first tick is at or
// below lo and the last at or above hi. An empty or non-finite range becomes
// [0, 1]; a single value v becomes [v/2, 3v/2] (or the reverse for negative v).
// Near the float64 limits it returns just the range's ends (or its one value).
func niceTicks(lo, hi float64, n int) []float64 {
	n = max(n, 1)
	if !finite(lo) || !finite(hi) {
		lo, hi = 0, 1
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	if lo == hi {
		if lo == 0 {
			hi = 1
		} else {
			d := math.Abs(lo) / 2
			if !finite(lo-d) || !finite(hi+d) {
				return []float64{lo}
			}
			lo, hi = lo-d, hi+d
		}
	}
	step := niceStep(hi/float64(n) - lo/float64(n))
	first := math.Floor(lo/step + 1e-9)
	last := math.Ceil(hi/step - 1e-9)
	if !finite(first*step) || !finite(last*step) || last-first > float64(4*n) {
		return []float64{lo, hi}
	}
	ticks := make([]float64, 0, int(last-first)+1)
	for k := first; k <= last; k++ {
		ticks = append(ticks, k*step)
	}
	return ticks
}

// logTicks returns powers of ten covering [lo, hi], which must be positive:
// the first tick is at or below lo, the last at or above hi (both within
// 1e±240), and there are at least two ticks and at most about ten.
func logTicks(lo, hi float64) []float64 {
	if !(lo > 0) || !finite(lo) {
		lo = 1
	}
	if !(hi > 0) || !finite(hi) {
		hi = lo
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	// Exponents stay within ±240 so that even the last tick, up to one step
	// past b, is a finite float64.
	a := min(max(int(math.Floor(math.Log10(lo)+1e-9)), -240), 239)
	b := min(max(int(math.Ceil(math.Log10(hi)-1e-9)), a+1), 240)
	step := 1
	for (b-a+step-1)/step > 8 {
		step++
	}
	var ticks []float64
	for k := a; ; k += step {
		ticks = append(ticks, pow10(k))
		if k >= b {
			break
		}
	}
	return ticks
}

// pow10 returns the float64 nearest to 10^k (math.Pow is not exact for k < 0).
func pow10(k int) float64 {
	v, _ := strconv.ParseFloat("1e"+strconv.Itoa(k), 64)
	return v
}

// tickDecimals returns how many decimals the labels of ticks step apart need.
func tickDecimals(step float64) int {
	for d := 0; d < 10; d++ {
		s := step * pow10(d)
		if math.Abs(s-math.Round(s)) < 1e-6*math.Max(1, s) {
			return d
		}
	}
	return 10
}

// tickLabels formats linear ticks all with the decimals their step needs
// (0.0, 2.5, 5.0), or in exponent form for very large or very small values.
func tickLabels(ticks []float64) []string {
	labels := make([]string, len(ticks))
	step, big := 1.0, 0.0
	if len(ticks) > 1 {
		step = ticks[1] - ticks[0]
	}
	for _, t := range ticks {
		big = math.Max(big, math.Abs(t))
	}
	for i, t := range ticks {
		if big >= 1e6 || (step > 0 && step < 1e-4) {
			labels[i] = trimZero(strconv.FormatFloat(t, 'g', 4, 64))
		} else {
			labels[i] = trimZero(strconv.FormatFloat(t, 'f', tickDecimals(step), 64))
		}
	}
	return labels
}

// logLabels formats powers of ten: 0.01, 0.1, 1, 10, ..., 1e+06.
func logLabels(ticks []float64) []string {
	labels := make([]string, len(ticks))
	for i, t := range ticks {
		labels[i] = strconv.FormatFloat(t, 'g', -1, 64)
	}
	return labels
}

// trimZero turns a negative zero label ("-0", "-0.0") into a positive one.
func trimZero(s string) string {
	if strings.HasPrefix(s, "-") && strings.Trim(s[1:], "0.") == "" {
		return s[1:]
	}
	return s
}

// formatValue formats a data value for tooltips: up to three decimals for
// ordinary magnitudes, exponent form for very large or very small ones.
func formatValue(v float64) string {
	a := math.Abs(v)
	if a >= 1e6 || (a > 0 && a < 1e-3) {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(s, "0")
	return trimZero(strings.TrimSuffix(s, "."))
}
