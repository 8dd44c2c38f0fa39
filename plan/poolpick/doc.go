// Package poolpick holds the pure rules that pick a pool of a fleet for a
// request before any placement inside the pool: by length (the pool of
// smallest max context that holds the request's tokens), by model (a
// table from model name to pool, with a fallback) and Pick, both at once
// for a live router (the pools that name the request's model, else those
// that take any model; then the smallest that holds its prompt plus an
// output estimate, else the largest). They have no state and no
// dependencies, so the planner's pool routers (package plan), the
// simulator and a live router can share them.
package poolpick
