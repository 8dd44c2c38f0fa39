package workload

import "time"

// PrefixReuse is a trace's prefix reuse under one cache of unbounded size
// shared by all requests: the ceiling no placement over bounded caches can
// beat (see UnboundedReuse).
type PrefixReuse struct {
	// Requests, PromptTokens and CachedTokens count the requests arriving
	// at or after the window's start.
	Requests     int
	PromptTokens int64
	CachedTokens int64
}

// Percent is CachedTokens over PromptTokens, in percent (0 for none).
func (p PrefixReuse) Percent() float64 {
	if p.PromptTokens == 0 {
		return 0
	}
	return 100 * float64(p.CachedTokens) / float64(p.PromptTokens)
}

// UnboundedReuse replays reqs' block hashes in arrival order into one cache
// that never evicts and counts, for the requests arriving at or after from,
// the prompt tokens of their longest cached prefix (blocks of blockSize
// tokens, the last one partial; a block counts the tokens it held when
// cached, as engine.Worker counts them), capped at one token short of the prompt as
// the engine caps a hit (it computes at least one token). Requests before
// from only fill the cache, as a warm-up does. Requests without block
// hashes count their prompt and reuse nothing.
func UnboundedReuse(reqs []TraceRequest, blockSize int, from time.Duration) PrefixReuse {
	var out PrefixReuse
	if blockSize < 1 {
		blockSize = MooncakeBlockSize
	}
	seen := make(map[uint64]int) // tokens each block held when cached
	for i := range reqs {
		r := &reqs[i]
		cached := 0
		for k, h := range r.BlockHashes {
			held, ok := seen[h]
			if !ok {
				break
			}
			want := min(blockSize, r.InputTokens-k*blockSize)
			cached += min(held, want)
			if held < want {
				break
			}
		}
		for k, h := range r.BlockHashes {
			seen[h] = max(seen[h], min(blockSize, r.InputTokens-k*blockSize))
		}
		if r.Arrival < from {
			continue
		}
		out.Requests++
		out.PromptTokens += int64(r.InputTokens)
		out.CachedTokens += int64(max(min(cached, r.InputTokens-1), 0))
	}
	return out
}
