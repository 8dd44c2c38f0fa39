package study

import (
	"errors"
	"testing"
)

// TestMergeRoutingRefusesBadParts: parts read from files are input like any
// other; a part count out of range, a part out of its count, or a missing
// part is an error that wraps ErrMerge, never a panic or a huge allocation.
func TestMergeRoutingRefusesBadParts(t *testing.T) {
	plan := []string{"a", "b"}
	part := func(shard, shards int, idx ...int) *Part {
		p := &Part{Study: "routing", Shard: shard, Shards: shards, Plan: plan, Indices: idx}
		for range idx {
			p.Runs = append(p.Runs, RunResult{})
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		parts []*Part
	}{
		{"no parts", nil},
		{"negative count", []*Part{part(0, -1)}},
		{"zero count", []*Part{part(0, 0)}},
		{"count over the bound", []*Part{part(0, MaxShards+1)}},
		{"shard out of its count", []*Part{part(2, 2, 0, 1)}},
		{"a part missing", []*Part{part(0, 2, 0)}},
		{"another study", []*Part{{Study: "slo", Shard: 0, Shards: 1, Plan: plan}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := MergeRouting(tc.parts); !errors.Is(err, ErrMerge) {
				t.Fatalf("MergeRouting: %v, want an error wrapping ErrMerge", err)
			}
		})
	}
}
