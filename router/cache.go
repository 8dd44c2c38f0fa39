package router

import "fmt"

// SetCacheTokens changes backend id's whole prefix-cache capacity in tokens
// (Backend.CacheTokens; zero: unknown), as its later stats say it: the
// prefix policy resizes its index for the backend at its next dispatch
// there. Negative sizes are an error.
func (r *Router) SetCacheTokens(id BackendID, tokens int) error {
	p, ok := r.position(id)
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoBackend, id)
	}
	if tokens < 0 {
		return fmt.Errorf("router: backend %d cache tokens %d, want >= 0 (0: unknown)", id, tokens)
	}
	r.views[p].CacheTokens = tokens
	return nil
}
