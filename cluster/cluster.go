package cluster

import (
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/engine"
)

// Backend is a set of engine workers behind one gateway.
type Backend struct {
	workers []*engine.Worker
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

// Overloaded reports whether a worker has no free sequence slot.
func Overloaded(w *engine.Worker) bool {
	return w.Running()+w.Waiting() >= w.Profile().MaxSeqs
}

// Pick chooses the worker for request r arriving at now: the worker that
// caches most of its prompt (its session's entry, or its prefix blocks when
// it carries block hashes) among those with a free slot, else the least
// loaded. It reads every worker as it is at now (KVUsedAt, CachedTokensAt,
// CachedPrefixAt), not as it was at its last event.
func (b *Backend) Pick(now time.Duration, r *engine.Request) int {
	best, bestCache := -1, 0
	for i, w := range b.workers {
		var c int
		if len(r.BlockHashes) > 0 {
			c = w.CachedPrefixAt(now, r)
		} else {
			c = w.CachedTokensAt(now, r.Session)
		}
		if c > bestCache && !Overloaded(w) {
			best, bestCache = i, c
		}
	}
	if best >= 0 {
		return best
	}
	best = 0
	for i := 1; i < len(b.workers); i++ {
		if less(now, b.workers[i], b.workers[best]) {
			best = i
		}
	}
	return best
}

func less(now time.Duration, a, c *engine.Worker) bool {
	la, lc := a.Running()+a.Waiting(), c.Running()+c.Waiting()
	if la != lc {
		return la < lc
	}
	return a.KVUsedAt(now) < c.KVUsedAt(now)
}

// Submit picks a worker and submits the request to it.
func (b *Backend) Submit(now time.Duration, r engine.Request) (worker int, err error) {
	worker = b.Pick(now, &r)
	if err := b.workers[worker].Submit(now, r); err != nil {
		return -1, err
	}
	return worker, nil
}

// Load is the number of running plus waiting sequences over all workers.
func (b *Backend) Load() int {
	n := 0
	for _, w := range b.workers {
		n += w.Running() + w.Waiting()
	}
	return n
}
