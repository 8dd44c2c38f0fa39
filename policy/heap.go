package policy

// The binary heaps of the picks (rankTree's best-first search, prefix's
// and Watch's k best): one sift each way, ordered by first(a, b), true when
// a belongs nearer the root than b.

// heapUp moves h[i] up to its place.
func heapUp[T any](h []T, i int, first func(a, b T) bool) {
	for i > 0 {
		p := (i - 1) / 2
		if !first(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// heapDown moves h[i] down to its place.
func heapDown[T any](h []T, i int, first func(a, b T) bool) {
	for {
		l, m := 2*i+1, i
		if l < len(h) && first(h[l], h[m]) {
			m = l
		}
		if l+1 < len(h) && first(h[l+1], h[m]) {
			m = l + 1
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// keepBest offers c to h, which keeps the k best values offered (better
// orders them), the worst of them at its root: c goes in while h holds
// fewer than k, else in place of the root if it is better.
func keepBest[T any](h []T, k int, c T, better func(a, b T) bool) []T {
	worse := func(a, b T) bool { return better(b, a) }
	if len(h) < k {
		h = append(h, c)
		heapUp(h, len(h)-1, worse)
		return h
	}
	if better(c, h[0]) {
		h[0] = c
		heapDown(h, 0, worse)
	}
	return h
}
