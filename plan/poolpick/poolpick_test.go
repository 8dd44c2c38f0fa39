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
