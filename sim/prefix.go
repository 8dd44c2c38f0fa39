package sim

import "github.com/stargate-llm/stargate/workload"

// traceBlocks is the block hash list a trace request gives its router's
// policy (nil for a session turn): the trace's own hash ids, each naming its
// whole prefix, as the engines' block cache keys them.
func traceBlocks(req *workload.TraceRequest) []uint64 {
	if req == nil {
		return nil
	}
	return req.BlockHashes
}

// cacheTokens is every prompt token a backend's engines can keep cached:
// each worker's GPU KV budget and host tier. The router's prefix index is
// sized by it (policy.View.CacheTokens).
func cacheTokens(spec BackendSpec) int {
	return int(min(int64(spec.Workers)*int64(spec.Profile.CacheCapacity()), 1<<31-1))
}
