package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxBackends bounds the backends of a fleet, groups expanded: enough for
// tens of thousands of GPUs, small enough that a typo in a count is an error
// rather than an out-of-memory.
const MaxBackends = 100_000

// GroupIndex is the placeholder a group's name pattern holds; each backend of
// the group gets its index there, from 0 to count-1.
const GroupIndex = "{i}"

// ExpandGroups replaces every backend group (an entry with a count) by its
// backends, in place and in order: the entry {name: gpu8-{i}, gpus: 8,
// count: 3} becomes gpu8-0, gpu8-1 and gpu8-2, each with 8 GPUs and the
// entry's profile. The expansion depends on the file only, so the same file
// always gives the same fleet. It fails, naming the entry, on a negative
// count, a group name without {i}, a single backend's name with {i}, or more
// than MaxBackends backends in all.
func (f *Fleet) ExpandGroups() error {
	var errs []error
	total := 0
	for ri := range f.Regions {
		r := &f.Regions[ri]
		grouped := false
		for k, b := range r.Backends {
			where := fmt.Sprintf("region %q: backend entry %d (%q)", r.Name, k+1, b.Name)
			switch {
			case b.Count < 0:
				errs = append(errs, fmt.Errorf("%s: count must be >= 1, got %d", where, b.Count))
			case b.Count > 0 && !strings.Contains(b.Name, GroupIndex):
				errs = append(errs, fmt.Errorf("%s: a group of %d needs %s in its name for each backend's index, e.g. %q",
					where, b.Count, GroupIndex, b.Name+"-"+GroupIndex))
			case b.Count == 0 && strings.Contains(b.Name, GroupIndex):
				errs = append(errs, fmt.Errorf("%s: %s in a name needs a count (the group's size)", where, GroupIndex))
			}
			n := max(b.Count, 1)
			if b.Count > 0 {
				grouped = true
			}
			if n > MaxBackends-total {
				return errors.Join(append(errs, fmt.Errorf("%s: more than %d backends in the fleet; split it or use bigger backends", where, MaxBackends))...)
			}
			total += n
		}
		if !grouped {
			continue
		}
		out := make([]BackendFileSpec, 0, len(r.Backends))
		for _, b := range r.Backends {
			if b.Count <= 0 {
				out = append(out, b)
				continue
			}
			for i := range b.Count {
				e := b // every field of the group, models included
				e.Name, e.Count, e.Models = strings.ReplaceAll(b.Name, GroupIndex, strconv.Itoa(i)), 0, slices.Clone(b.Models)
				out = append(out, e)
			}
		}
		r.Backends = out
	}
	return errors.Join(errs...)
}
