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

// Pool is one pool a live router may pick: its name, its max context
// (prompt plus output tokens) and the models its backends serve (none: any
// model).
type Pool struct {
	Name      string
	MaxTokens int
	Models    []string
}

// Pick is the pool for a request of tokens tokens (the prompt plus an
// output estimate known at request time) for model, by model first and
// length second: the candidates are the pools that name model in their
// Models; if none does (or model is ""), the pools that list no model (they
// take any); if there are none of those either, every pool. Among the
// candidates it is the smallest that holds the request (ByLength), else the
// largest (the backend's own context check then refuses what is too long).
// It is -1 only when there are no pools.
func Pick(pools []Pool, tokens int, model string) int {
	maxTokens := make([]int, len(pools))
	candidates := func(keep func(Pool) bool) int {
		n := 0
		for i, p := range pools {
			maxTokens[i] = -1 // not a candidate
			if keep(p) {
				maxTokens[i] = p.MaxTokens
				n++
			}
		}
		return n
	}
	if model == "" || candidates(func(p Pool) bool { return contains(p.Models, model) }) == 0 {
		if candidates(func(p Pool) bool { return len(p.Models) == 0 }) == 0 {
			candidates(func(Pool) bool { return true })
		}
	}
	if best := ByLength(maxTokens, tokens); best >= 0 {
		return best
	}
	largest := -1
	for i, m := range maxTokens {
		if m >= 0 && (largest < 0 || m > maxTokens[largest]) {
			largest = i
		}
	}
	return largest
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
