package routerd

import (
	"sync"

	"github.com/stargate-llm/stargate/plan/poolpick"
)

// Pool is a pool of backends the router picks for a request before it
// places the request inside it, with the planner's rule (poolpick.Pick):
// among the pools whose Models name the request's model (else those that
// list none and take any model), the smallest whose MaxTokens holds the
// request's token estimate (its prompt plus max_tokens), else the largest. Backends names
// the pool's members; a backend in no pool takes only requests that fell
// back (below).
type Pool struct {
	Name      string
	MaxTokens int
	Models    []string
	Backends  []string
}

// FallbackPool is how a request counts whose pool had no eligible backend
// serving its model: it is placed on the whole fleet instead, as if the
// router had no pools.
const FallbackPool = poolpick.Fallback

// validatePools reports what is wrong with pools (poolpick.Check, the rule
// fleet files are held to as well).
func validatePools(pools []Pool) []error {
	members := make([]poolpick.Member, len(pools))
	for i, p := range pools {
		members[i] = poolpick.Member{Pool: poolpick.Pool{Name: p.Name, MaxTokens: p.MaxTokens, Models: p.Models}, Backends: p.Backends}
	}
	return poolpick.Check(members, nil, nil)
}

// poolOf maps each pooled backend's name to its pool, for the core.
func poolOf(pools []Pool) map[string]string {
	if len(pools) == 0 {
		return nil
	}
	of := map[string]string{}
	for _, p := range pools {
		for _, b := range p.Backends {
			of[b] = p.Name
		}
	}
	return of
}

// poolState is the router's pools as poolpick takes them, made once, and
// the requests each pool was picked for.
type poolState struct {
	once sync.Once
	defs []poolpick.Pool
	mu   sync.Mutex
	n    map[string]int
}

func (c *poolState) add(pool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[pool]++
}

// PoolPicks is how many requests the router picked each pool for
// (FallbackPool: those placed on the whole fleet because their pool had no
// eligible backend); empty without pools.
func (s *Server) PoolPicks() map[string]int {
	s.pools.mu.Lock()
	defer s.pools.mu.Unlock()
	out := make(map[string]int, len(s.pools.n))
	for k, v := range s.pools.n {
		out[k] = v
	}
	return out
}

// pickPool is the pool a request of tokens tokens for model goes to, ""
// for the whole fleet: with no pools, or when the picked pool has no
// eligible backend that serves the model (a fallback, counted).
func (s *Server) pickPool(tokens int, model string) string {
	if len(s.cfg.Pools) == 0 {
		return ""
	}
	s.pools.once.Do(func() {
		for _, p := range s.cfg.Pools {
			s.pools.defs = append(s.pools.defs, poolpick.Pool{Name: p.Name, MaxTokens: p.MaxTokens, Models: p.Models})
		}
	})
	name := s.cfg.Pools[poolpick.Pick(s.pools.defs, tokens, model)].Name
	if !s.poolCanTake(name, model) {
		name = ""
	}
	if name == "" {
		s.pools.add(FallbackPool)
	} else {
		s.pools.add(name)
	}
	return name
}

// poolCanTake is the core's PoolCanTake under the server's lock.
func (s *Server) poolCanTake(pool, model string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core != nil && s.core.PoolCanTake(pool, model)
}
