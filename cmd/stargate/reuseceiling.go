package main

import (
	"fmt"
	"io"
	"time"

	"github.com/stargate-llm/stargate/workload"
)

// printReuseCeiling prints the prefix reuse one cache of unbounded size
// would give the trace's requests arriving after warmup (the earlier ones
// fill it): the ceiling of `sim --trace`'s reuse % column.
func printReuseCeiling(w io.Writer, reqs []workload.TraceRequest, warmup time.Duration) error {
	r := workload.UnboundedReuse(reqs, workload.MooncakeBlockSize, warmup)
	_, err := fmt.Fprintf(w, "unbounded single-cache reuse: %.1f%% (%d of %d prompt tokens, %d requests after %v)\n",
		r.Percent(), r.CachedTokens, r.PromptTokens, r.Requests, warmup)
	return err
}
