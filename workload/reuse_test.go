package workload

import (
	"testing"
	"time"
)

func TestUnboundedReuse(t *testing.T) {
	reqs := []TraceRequest{
		{Arrival: 0, InputTokens: 1000, BlockHashes: []uint64{1, 2}},
		{Arrival: time.Second, InputTokens: 1200, BlockHashes: []uint64{1, 2, 3}},  // 1000 cached
		{Arrival: 2 * time.Second, InputTokens: 600, BlockHashes: []uint64{1, 9}},  // 512 cached
		{Arrival: 3 * time.Second, InputTokens: 1000, BlockHashes: []uint64{1, 2}}, // all but one token
		{Arrival: 4 * time.Second, InputTokens: 700, BlockHashes: []uint64{5, 1}},  // first block new: 0
		{Arrival: 5 * time.Second, InputTokens: 50},                                // no blocks
	}
	tests := []struct {
		from         time.Duration
		requests     int
		prompt, hits int64
	}{
		{0, 6, 4550, 1000 + 512 + 999},
		{2 * time.Second, 4, 2350, 512 + 999},
		{time.Hour, 0, 0, 0},
	}
	for _, tc := range tests {
		got := UnboundedReuse(reqs, 512, tc.from)
		if got.Requests != tc.requests || got.PromptTokens != tc.prompt || got.CachedTokens != tc.hits {
			t.Errorf("from %v: %+v, want %d requests, %d prompt, %d cached", tc.from, got, tc.requests, tc.prompt, tc.hits)
		}
	}
	if p := UnboundedReuse(reqs, 512, time.Hour).Percent(); p != 0 {
		t.Errorf("empty window reuses %v%%", p)
	}
}
