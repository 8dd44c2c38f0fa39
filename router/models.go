package router

import (
	"slices"
	"time"
)

// Serves reports whether a backend whose /v1/models lists models takes a
// request for model: the one rule of model-aware placement, shared by the
// live router and the simulator. A backend that lists no model takes every
// model (a single-model fleet need not name it), and a request that names
// none goes anywhere.
func Serves(models []string, model string) bool {
	return model == "" || len(models) == 0 || slices.Contains(models, model)
}

// SetModels sets the models backend id's /v1/models lists (none: every
// model).
func (r *Router) SetModels(_ time.Duration, id BackendID, models []string) error {
	p, ok := r.position(id)
	if !ok {
		return ErrNoBackend
	}
	if !slices.Equal(r.models[p], models) {
		r.gen++
	}
	r.models[p] = slices.Clone(models)
	return nil
}

// Knows reports whether some backend, in any state, serves model; a router
// answers a request for a model it does not know at once, as not found,
// rather than placing it where it would fail.
func (r *Router) Knows(model string) bool {
	for _, ms := range r.models {
		if Serves(ms, model) {
			return true
		}
	}
	return false
}

// Models is the sorted, distinct models the backends list.
func (r *Router) Models() []string {
	var out []string
	for _, ms := range r.models {
		out = append(out, ms...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
