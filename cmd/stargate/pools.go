package main

import (
	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/serve/router"
)

// routerPools are a fleet file's pools as the live router takes them.
func routerPools(specs []config.PoolFileSpec) []router.Pool {
	var out []router.Pool
	for _, p := range specs {
		out = append(out, router.Pool{Name: p.Name, MaxTokens: p.MaxTokens, Models: p.Models, Backends: p.Backends})
	}
	return out
}
