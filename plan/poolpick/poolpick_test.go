package poolpick

import "testing"

func TestByLength(t *testing.T) {
	for _, tc := range []struct {
		max    []int
		tokens int
		want   int
	}{
		{[]int{2048, 32768}, 1, 0},
		{[]int{2048, 32768}, 2048, 0},
		{[]int{2048, 32768}, 2049, 1},
		{[]int{2048, 32768}, 32769, -1},
		{[]int{32768, 2048}, 100, 1}, // any order
		{[]int{4096, 4096}, 100, 0},  // the first of equals
		{nil, 1, -1},
	} {
		if got := ByLength(tc.max, tc.tokens); got != tc.want {
			t.Errorf("ByLength(%v, %d) = %d, want %d", tc.max, tc.tokens, got, tc.want)
		}
	}
}

func TestByModel(t *testing.T) {
	table := map[string]int{"llama-8b": 0, "llama-70b": 1}
	for _, tc := range []struct {
		model    string
		fallback int
		want     int
	}{
		{"llama-8b", 1, 0},
		{"llama-70b", 0, 1},
		{"mistral", 1, 1},
		{"", -1, -1},
	} {
		if got := ByModel(table, tc.model, tc.fallback); got != tc.want {
			t.Errorf("ByModel(%q, %d) = %d, want %d", tc.model, tc.fallback, got, tc.want)
		}
	}
}

func TestPick(t *testing.T) {
	pools := []Pool{
		{Name: "short", MaxTokens: 2048},
		{Name: "long", MaxTokens: 32768},
		{Name: "big", MaxTokens: 8192, Models: []string{"llama-70b"}},
	}
	for _, tc := range []struct {
		tokens int
		model  string
		want   int
	}{
		{100, "", 0},            // short fits (the pools that take any model)
		{5000, "", 1},           // big names a model: not a candidate
		{40000, "", 1},          // none holds it: the largest
		{100, "llama-70b", 2},   // big names it: the model first
		{20000, "llama-70b", 2}, // too long for big, but the only pool of its model
		{100, "mistral", 0},     // nobody names it: the pools that take any model
		{40000, "mistral", 1},   // too long for all: the largest
	} {
		if got := Pick(pools, tc.tokens, tc.model); got != tc.want {
			t.Errorf("Pick(%d, %q) = %d, want %d", tc.tokens, tc.model, got, tc.want)
		}
	}
	if got := Pick(nil, 1, ""); got != -1 {
		t.Errorf("Pick(no pools) = %d, want -1", got)
	}
	only := []Pool{{Name: "a", MaxTokens: 100, Models: []string{"m1"}}, {Name: "b", MaxTokens: 1000, Models: []string{"m2"}}}
	if got := Pick(only, 500, "m1"); got != 0 {
		t.Errorf("Pick(500 tokens, m1) = %d, want 0: the only pool that serves m1, though too small", got)
	}
	if got := Pick(only, 500, "m3"); got != 1 {
		t.Errorf("Pick(500 tokens, m3) = %d, want 1: no pool names m3 or takes any, so every pool by length", got)
	}
}
