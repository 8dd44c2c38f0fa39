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
