package router

// pools is the pool each backend belongs to, by backend name, and a
// scratch list of the backends one pick hides because they are outside
// the request's pool.
type pools struct {
	of     map[string]string
	hidden []int
}

// SetPools puts backends in pools: of maps a backend's name to its pool's
// name (a backend not in it belongs to no pool, and a request for a pool
// never goes there). A request whose Ask names a pool is placed only on
// that pool's backends, as one that names a model is placed only on the
// backends that serve it; nil clears every pool.
func (r *Router) SetPools(of map[string]string) {
	r.pools.of = make(map[string]string, len(of))
	for name, pool := range of {
		r.pools.of[name] = pool
	}
	r.gen++ // a waiting request may now fit elsewhere (steady)
}

// InPool reports whether backend id is in pool ("" takes every backend).
func (r *Router) InPool(id BackendID, pool string) bool {
	p, ok := r.position(id)
	return ok && (pool == "" || r.pools.of[r.names[p]] == pool)
}

// PoolCanTake reports whether some backend of pool that serves model is
// eligible now (Ready and not switched off): where a pool picked by length
// or model has no such backend, the caller falls back (see
// serve/routerd's pool selection) rather than queueing for a pool that
// cannot answer.
func (r *Router) PoolCanTake(pool, model string) bool {
	for i := range r.views {
		if r.views[i].Eligible && Serves(r.models[i], model) && (pool == "" || r.pools.of[r.names[i]] == pool) {
			return true
		}
	}
	return false
}

// hideOutsidePool makes the eligible backends outside pool ineligible for
// one pick and returns them, for decide to restore; none with pool "".
func (r *Router) hideOutsidePool(pool string) []int {
	r.pools.hidden = r.pools.hidden[:0]
	if pool == "" {
		return nil
	}
	for i := range r.views {
		if r.views[i].Eligible && r.pools.of[r.names[i]] != pool {
			r.views[i].Eligible = false
			r.touch(i)
			r.pools.hidden = append(r.pools.hidden, i)
		}
	}
	return r.pools.hidden
}
