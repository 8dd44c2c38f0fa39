package config

import (
	"errors"
	"fmt"

	"github.com/stargate-llm/stargate/plan/poolpick"
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

// checkPoolSpecs checks pools with the live router's own rule
// (poolpick.Check); with backends nil (a router's --pools file, whose
// backends register later) any name goes.
func checkPoolSpecs(pools []PoolFileSpec, backends map[string]bool) error {
	members := make([]poolpick.Member, len(pools))
	for i, p := range pools {
		members[i] = poolpick.Member{Pool: poolpick.Pool{Name: p.Name, MaxTokens: p.MaxTokens, Models: p.Models}, Backends: p.Backends}
	}
	var known func(string) bool
	if backends != nil {
		known = func(b string) bool { return backends[b] }
	}
	names := func() []string {
		k := mapKeys(backends)
		if len(k) > 10 {
			k = append(k[:10], "...")
		}
		return k
	}
	if err := errors.Join(poolpick.Check(members, known, names)...); err != nil {
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
