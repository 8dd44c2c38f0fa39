package main

import (
	"fmt"
	"io"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/prefix"
	"github.com/stargate-llm/stargate/workload"
)

// printReuseCeiling prints the prefix reuse of the trace's requests
// arriving after warmup (the earlier ones fill the caches) under one cache
// of unbounded size, the ceiling of `sim --trace`'s reuse % column, and,
// for each fleet, under one LRU cache as large as the fleet's whole KV
// budget: what placement could reach if the fleet's caches were one.
func printReuseCeiling(w io.Writer, reqs []workload.TraceRequest, warmup time.Duration, fleets []string, engineName string) error {
	r := workload.UnboundedReuse(reqs, workload.MooncakeBlockSize, warmup)
	if _, err := fmt.Fprintf(w, "unbounded single-cache reuse: %.1f%% (%d of %d prompt tokens, %d requests after %v)\n",
		r.Percent(), r.CachedTokens, r.PromptTokens, r.Requests, warmup); err != nil {
		return err
	}
	for _, name := range fleets {
		f, err := config.Load(name)
		if err != nil {
			return usageError{err}
		}
		kv, host, err := fleetKVTokens(f, engineName)
		if err != nil {
			return usageError{fmt.Errorf("fleet %s: %w", name, err)}
		}
		pct := lruReuse(reqs, workload.MooncakeBlockSize, kv, warmup)
		if _, err := fmt.Fprintf(w, "%s: one LRU cache of the fleet's %d KV tokens: %.1f%%\n", f.Name, kv, pct); err != nil {
			return err
		}
		if host > 0 {
			pct := lruReuse(reqs, workload.MooncakeBlockSize, kv+host, warmup)
			if _, err := fmt.Fprintf(w, "%s: one LRU cache of the fleet's %d GPU and %d host KV tokens: %.1f%%\n", f.Name, kv, host, pct); err != nil {
				return err
			}
		}
	}
	return nil
}

// fleetKVTokens is the sum of every GPU's KV budget in the fleet, and of
// its host tiers, with engineName (if set) replacing the fleet's default
// profile.
func fleetKVTokens(f *config.Fleet, engineName string) (kv, host int64, err error) {
	def := f.Engine
	if engineName != "" {
		def = engineName
	}
	for _, r := range f.Regions {
		for _, b := range r.Backends {
			name := def
			if b.Profile != "" {
				name = b.Profile
			}
			p, ok := f.Profiles[name]
			if !ok {
				var err error
				if p, err = engine.ProfileByName(name); err != nil {
					return 0, 0, err
				}
			}
			gpus := int64(max(b.GPUs, 1) * max(b.Count, 1))
			kv += gpus * int64(p.KVTokens)
			host += gpus * int64(p.HostKVTokens)
		}
	}
	return kv, host, nil
}

// lruReuse is the reuse percentage of the requests arriving at or after
// from under one LRU cache of kvTokens, filled at each request's arrival
// (a prefix.Index of one backend: blocks evicted from a chain's tail).
func lruReuse(reqs []workload.TraceRequest, blockSize int, kvTokens int64, from time.Duration) float64 {
	x := prefix.New(0)
	id, err := x.Add(int(max(min(kvTokens/int64(blockSize), 1<<31-1), 1)))
	if err != nil {
		return 0
	}
	var prompt, cached int64
	var out []int32
	for i := range reqs {
		q := &reqs[i]
		var best int
		out, best = x.Match(q.BlockHashes, q.Arrival, out)
		x.Insert(id, q.BlockHashes, q.Arrival)
		if q.Arrival < from {
			continue
		}
		hit := 0
		for k := range best {
			hit += min(blockSize, q.InputTokens-k*blockSize)
		}
		prompt += int64(q.InputTokens)
		cached += int64(max(min(hit, q.InputTokens-1), 0))
	}
	if prompt == 0 {
		return 0
	}
	return 100 * float64(cached) / float64(prompt)
}
