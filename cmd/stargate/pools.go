package main

import (
	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/serve/routerd"
)

// routerPools are a fleet file's pools as the live router takes them.
func routerPools(specs []config.PoolFileSpec) []routerd.Pool {
	var out []routerd.Pool
	for _, p := range specs {
		out = append(out, routerd.Pool{Name: p.Name, MaxTokens: p.MaxTokens, Models: p.Models, Backends: p.Backends})
	}
	return out
}
