package poolpick

import "fmt"

// Fallback is the name a live router counts a request under when its pool
// had no eligible backend and it went to the whole fleet; no pool may take
// it.
const Fallback = "fallback"

// Member is a pool with the names of its backends, as a fleet file's pools
// section or a router's --pools file lists it.
type Member struct {
	Pool
	Backends []string
}

// Check reports what is wrong with pools, the one rule for fleet files and
// live routers: every pool has a name, unique and not Fallback, max tokens
// of at least 1 and at least one backend; a backend belongs to one pool at
// most; and, when known is not nil, every backend is one it knows (then
// names lists them for the message).
func Check(pools []Member, known func(name string) bool, names func() []string) []error {
	var errs []error
	seen, member := map[string]bool{}, map[string]string{}
	for i, p := range pools {
		if p.Name == "" || p.Name == Fallback || seen[p.Name] {
			errs = append(errs, fmt.Errorf("pools[%d]: name %q is empty, repeated or reserved (%q)", i, p.Name, Fallback))
		}
		seen[p.Name] = true
		if p.MaxTokens < 1 {
			errs = append(errs, fmt.Errorf("pool %q: max_tokens must be >= 1, got %d", p.Name, p.MaxTokens))
		}
		if len(p.Backends) == 0 {
			errs = append(errs, fmt.Errorf("pool %q: list its backends by name", p.Name))
		}
		for _, b := range p.Backends {
			if known != nil && !known(b) {
				errs = append(errs, fmt.Errorf("pool %q: backend %q is not in the fleet (backends: %v)", p.Name, b, names()))
			}
			if other, ok := member[b]; ok {
				errs = append(errs, fmt.Errorf("backend %q is in pools %q and %q; a backend belongs to one pool", b, other, p.Name))
			}
			member[b] = p.Name
		}
	}
	return errs
}
