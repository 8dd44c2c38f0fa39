package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimReuseCeiling(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	// Two requests: the second reuses the first's two blocks (1,024 of its
	// 1,500 tokens) under an unbounded cache.
	lines := `{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]}
{"timestamp": 1000, "input_length": 1500, "output_length": 5, "hash_ids": [1, 2, 3]}
`
	if err := os.WriteFile(trace, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "sim", "--fleet", "../../examples/plan/trace-fleet.yaml", "--trace", trace, "--warmup", "500ms", "--reuse-ceiling")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"unbounded single-cache reuse: 68.3% (1024 of 1500 prompt tokens, 1 requests", "trace-fleet: one LRU cache of the fleet's 8000000 KV tokens: 68.3%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, _, stderr := runCLI(t, "sim", "--reuse-ceiling"); code != 2 || !strings.Contains(stderr, "--reuse-ceiling needs --trace") {
		t.Errorf("--reuse-ceiling without --trace: exit %d, %s", code, stderr)
	}
}
