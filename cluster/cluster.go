package cluster

import (
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/engine"
)

// Backend is a set of engine workers behind one gateway.
type Backend struct {
	workers []*engine.Worker
	// ask holds Submit's request while Pick reads it: a pointer to a local
	// would move the request to the heap (Pick reads it through an
	// interface), one allocation per request.
	ask engine.Request
}

// New returns a backend of n identical workers.
func New(n int, p engine.Profile, opts engine.Options) (*Backend, error) {
	if n < 1 {
		return nil, fmt.Errorf("cluster: a backend needs at least one worker, got %d", n)
	}
	b := &Backend{workers: make([]*engine.Worker, n)}
	for i := range b.workers {
		w, err := engine.NewWorker(p, opts)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		b.workers[i] = w
	}
	return b, nil
}

// Len is the number of workers.
func (b *Backend) Len() int { return len(b.workers) }

// Worker returns worker i.
func (b *Backend) Worker(i int) *engine.Worker { return b.workers[i] }

// Worker is what the picker reads of a worker: an engine.Worker in the
// simulator and the mock engine, or a gateway's record of a remote engine.
type Worker interface {
	// Load is the number of sequences the worker runs or holds waiting.
	Load() int
	// SeqLimit is how many sequences it runs at once.
	SeqLimit() int
	// CachedPromptAt is how many of r's prompt tokens it holds cached at now.
	CachedPromptAt(now time.Duration, r *engine.Request) int
	// KVUsedAt is the KV tokens in use at now.
	KVUsedAt(now time.Duration) int
}

var _ Worker = (*engine.Worker)(nil)

// Overloaded reports whether a worker has no free sequence slot.
func Overloaded(w Worker) bool { return w.Load() >= w.SeqLimit() }

// Pick chooses the worker for request r arriving at now (see Pick).
func (b *Backend) Pick(now time.Duration, r *engine.Request) int { return Pick(now, r, b.workers) }

// Pick chooses among workers for request r arriving at now: the worker that
// caches most of its prompt (its session's entry, or its prefix blocks when
// it carries block hashes) among those with a free slot, the least loaded
// of those caching equally much (a prefix every worker holds, such as a
// common system prompt, must not draw every request to the lowest index),
// else the least loaded (then least KV in use, then lowest index). It reads
// every worker as it is at now, not as it was at its last event. It returns
// -1 for no workers.
func Pick[W Worker](now time.Duration, r *engine.Request, workers []W) int {
	best, bestCache := -1, 0
	for i, w := range workers {
		c := w.CachedPromptAt(now, r)
		if (c > bestCache || c == bestCache && c > 0 && less(now, w, workers[best])) && !Overloaded(w) {
			best, bestCache = i, c
		}
	}
	if best >= 0 || len(workers) == 0 {
		return best
	}
	best = 0
	for i := 1; i < len(workers); i++ {
		if less(now, workers[i], workers[best]) {
			best = i
		}
	}
	return best
}

func less(now time.Duration, a, c Worker) bool {
	la, lc := a.Load(), c.Load()
	if la != lc {
		return la < lc
	}
	return a.KVUsedAt(now) < c.KVUsedAt(now)
}

// Submit picks a worker and submits the request to it.
func (b *Backend) Submit(now time.Duration, r engine.Request) (worker int, err error) {
	b.ask = r
	worker = b.Pick(now, &b.ask)
	b.ask = engine.Request{}
	if err := b.workers[worker].Submit(now, r); err != nil {
		return -1, err
	}
	return worker, nil
}

// Load is the number of running plus waiting sequences over all workers.
func (b *Backend) Load() int {
	n := 0
	for _, w := range b.workers {
		n += w.Load()
	}
	return n
}
