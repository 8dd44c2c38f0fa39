package config

import (
	"errors"
	"fmt"
)

// PoolFileSpec is one pool of a fleet file's pools section: backends (by
// name, after groups are expanded) that the live router picks for a
// request before placing it among them, by length and model with the
// planner's rule (plan/poolpick.Pick): among the pools whose models name
// the request's model (else those that list none and take any model), the
// smallest whose max_tokens holds the request's prompt estimate plus
// max_tokens, else the largest. A pool with no eligible backend falls back to the whole fleet.
// The simulator does not read this section (its pools are the planner's).
type PoolFileSpec struct {
	Name      string   `yaml:"name"`
	MaxTokens int      `yaml:"max_tokens"`
	Models    []string `yaml:"models"`
	Backends  []string `yaml:"backends"`
}

// checkPools reports what is wrong with the pools section: every pool
// needs a unique name, max_tokens >= 1 and backends of this fleet, each in
// one pool at most.
func (f *Fleet) checkPools() error {
	if len(f.Pools) == 0 {
		return nil
	}
	backends := map[string]bool{}
	for _, r := range f.Regions {
		for _, b := range r.Backends {
			backends[b.Name] = true
		}
	}
	return checkPoolSpecs(f.Pools, backends)
}

// checkPoolSpecs checks pools as checkPools does; with backends nil (a
// router's --pools file, whose backends register later) any name goes.
func checkPoolSpecs(pools []PoolFileSpec, backends map[string]bool) error {
	var errs []error
	names, member := map[string]bool{}, map[string]string{}
	for i, p := range pools {
		if p.Name == "" || names[p.Name] {
			errs = append(errs, fmt.Errorf("pools[%d]: name %q is empty or repeated", i, p.Name))
		}
		names[p.Name] = true
		if p.MaxTokens < 1 {
			errs = append(errs, fmt.Errorf("pool %q: max_tokens must be >= 1, got %d", p.Name, p.MaxTokens))
		}
		if len(p.Backends) == 0 {
			errs = append(errs, fmt.Errorf("pool %q: list its backends by name", p.Name))
		}
		for _, b := range p.Backends {
			if backends != nil && !backends[b] {
				known := mapKeys(backends)
				if len(known) > 10 {
					known = append(known[:10], "...")
				}
				errs = append(errs, fmt.Errorf("pool %q: backend %q is not in the fleet (backends: %v)", p.Name, b, known))
			}
			if other, ok := member[b]; ok {
				errs = append(errs, fmt.Errorf("backend %q is in pools %q and %q; a backend belongs to one pool", b, other, p.Name))
			}
			member[b] = p.Name
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pools: %w", err)
	}
	return nil
}

// ParsePools decodes a file holding only a pools section's list (the
// entries of a fleet file's pools), strictly, as a router's --pools flag
// reads it: the backends are gateway ids, which register later, so they
// are not checked against a fleet. what names the input in messages.
func ParsePools(what string, data []byte) ([]PoolFileSpec, error) {
	var pools []PoolFileSpec
	if err := DecodeStrict(what, data, &pools); err != nil {
		return nil, err
	}
	if len(pools) == 0 {
		return nil, fmt.Errorf("%s: no pools: list them as a fleet file's pools section does (- name: short, max_tokens: 6144, backends: [gw-a])", what)
	}
	if err := checkPoolSpecs(pools, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return pools, nil
}

// LoadPools reads a pools file (see ParsePools).
func LoadPools(path string) ([]PoolFileSpec, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, fmt.Errorf("reading pools file: %w", err)
	}
	return ParsePools("pools file "+path, data)
}
