package study

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PairedDiff is one policy's measure minus another's in one phase, seed by
// seed: every policy of the study runs the same seeds (same workload, same
// faults), so the difference on a seed leaves out the seed-to-seed spread
// that each policy's own interval carries. Diff is the mean of the
// per-seed differences with its 95% interval (Student's t, N-1 degrees of
// freedom).
type PairedDiff struct {
	Phase   string `json:"phase"`
	Mode    string `json:"mode,omitempty"`
	Policy  string `json:"policy"`
	Against string `json:"against"`
	// Measure is the PhaseMetrics field compared: ttft_p95_s or ttft_p99_s.
	Measure string `json:"measure"`
	Diff    Stat   `json:"diff"`
}

// pairedMeasures are the measures Paired compares, by their JSON names.
var pairedMeasures = []struct {
	name string
	get  func(PhaseMetrics) float64
}{
	{"ttft_p95_s", func(m PhaseMetrics) float64 { return m.P95S }},
	{"ttft_p99_s", func(m PhaseMetrics) float64 { return m.P99S }},
}

// pairedReference is the policy a cell's others are compared with:
// pressure when it ran (the policy the study evaluates), else the first in
// run order. The network phase runs its arms as round-robin,
// pressure-no-net, pressure, so run order alone would compare the others
// with round-robin.
const pairedReference = "pressure"

// Paired compares, in every phase and mode, the reference policy
// (pressure when it ran there, else the first in run order) with each of
// the phase's other policies, in run order, on the seeds both ran; a pair
// with fewer than two common seeds is left out. Each pair gives one
// PairedDiff per measure, in pairedMeasures' order.
func (r *ResilienceResults) Paired() []PairedDiff {
	type cellKey struct{ phase, mode string }
	var cellOrder []cellKey
	pols := map[cellKey][]string{}
	bySeed := map[phaseKey]map[uint64]PhaseMetrics{}
	for _, m := range r.Runs {
		ck, pk := cellKey{m.Phase, m.Mode}, phaseKey{m.Phase, m.Policy, m.Mode}
		if _, ok := pols[ck]; !ok {
			cellOrder = append(cellOrder, ck)
		}
		if !slices.Contains(pols[ck], m.Policy) {
			pols[ck] = append(pols[ck], m.Policy)
		}
		if bySeed[pk] == nil {
			bySeed[pk] = map[uint64]PhaseMetrics{}
		}
		bySeed[pk][m.Seed] = m
	}
	var out []PairedDiff
	for _, ck := range cellOrder {
		ps := pols[ck]
		refPolicy := ps[0]
		if slices.Contains(ps, pairedReference) {
			refPolicy = pairedReference
		}
		ref := bySeed[phaseKey{ck.phase, refPolicy, ck.mode}]
		for _, other := range ps {
			if other == refPolicy {
				continue
			}
			against := bySeed[phaseKey{ck.phase, other, ck.mode}]
			var seeds []uint64
			for s := range ref {
				if _, ok := against[s]; ok {
					seeds = append(seeds, s)
				}
			}
			if len(seeds) < 2 {
				continue
			}
			slices.Sort(seeds)
			for _, ms := range pairedMeasures {
				ds := make([]float64, len(seeds))
				for i, s := range seeds {
					ds[i] = ms.get(ref[s]) - ms.get(against[s])
				}
				out = append(out, PairedDiff{Phase: ck.phase, Mode: ck.mode, Policy: refPolicy, Against: other, Measure: ms.name, Diff: NewStat(ds)})
			}
		}
	}
	return out
}

// PairedLines prints Paired: per phase and pair, the mean difference of
// TTFT p95 and p99 with its 95% interval, and whether the interval
// excludes zero.
func (r *ResilienceResults) PairedLines() []string {
	ds := r.Paired()
	if len(ds) == 0 {
		return nil
	}
	lines := []string{"paired differences on the same seeds (mean of per-seed differences ± 95% t half-width; * : the interval excludes 0):"}
	// Paired gives each pair's measures one after the other, p95 then p99.
	for pair := range slices.Chunk(ds, len(pairedMeasures)) {
		p95, p99 := pair[0], pair[1]
		lines = append(lines, fmt.Sprintf("  %s%-15s %s minus %s: TTFT p95 %s s%s, p99 %s s%s (%d seeds)", modeLabel(p95.Mode), p95.Phase, p95.Policy, p95.Against,
			signedPM(p95.Diff, 3), beyond(p95.Diff), signedPM(p99.Diff, 3), beyond(p99.Diff), p95.Diff.N))
	}
	return lines
}

// signedPM is pm with the mean's sign always shown.
func signedPM(s Stat, digits int) string {
	return fmt.Sprintf("%+.*f ± %.*f", digits, s.Mean, digits, s.Half)
}

// beyond marks an interval that excludes zero.
func beyond(s Stat) string {
	if s.Lo() > 0 || s.Hi() < 0 {
		return " *"
	}
	return ""
}

// MaxStudySeeds bounds a seed list (ParseSeeds): each seed is one run per
// phase and policy.
const MaxStudySeeds = 1000

// ParseSeeds reads a list of seeds: comma-separated numbers and inclusive
// ranges, "1-10,31-40". Seeds must be distinct and at least 1, at most
// MaxStudySeeds of them.
func ParseSeeds(s string) ([]uint64, error) {
	var out []uint64
	add := func(v uint64) error {
		if slices.Contains(out, v) {
			return fmt.Errorf("%w: seed %d is listed twice in %q", ErrBadOptions, v, s)
		}
		if len(out) == MaxStudySeeds {
			return fmt.Errorf("%w: more than %d seeds in %q", ErrBadOptions, MaxStudySeeds, s)
		}
		out = append(out, v)
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseSeed(lo, part)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parseSeed(hi, part); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("%w: seed range %q runs backwards (want low-high, such as 31-40)", ErrBadOptions, part)
			}
		}
		for v := a; ; v++ {
			if err := add(v); err != nil {
				return nil, err
			}
			if v == b {
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no seeds in %q (want numbers and ranges, such as 1-10,31-40)", ErrBadOptions, s)
	}
	return out, nil
}

func parseSeed(s, part string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%w: seed %q in %q: want a whole number of at least 1, or a range such as 31-40", ErrBadOptions, s, part)
	}
	return v, nil
}
