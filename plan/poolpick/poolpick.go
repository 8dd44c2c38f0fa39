package poolpick

// ByLength is the index of the pool of smallest max tokens that holds a
// request of tokens tokens (the first of equals), or -1 if none does.
// maxTokens[i] is pool i's max context (prompt plus output tokens); the
// pools may come in any order.
func ByLength(maxTokens []int, tokens int) int {
	best := -1
	for i, m := range maxTokens {
		if tokens <= m && (best < 0 || m < maxTokens[best]) {
			best = i
		}
	}
	return best
}

// ByModel is the pool that table maps model to, or fallback if the model
// is not in it (fallback may be -1: no pool).
func ByModel(table map[string]int, model string, fallback int) int {
	if p, ok := table[model]; ok {
		return p
	}
	return fallback
}
