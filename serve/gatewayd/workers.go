package gatewayd

import (
	"time"

	"github.com/stargate-llm/stargate/cluster"
	"github.com/stargate-llm/stargate/engine"
	core "github.com/stargate-llm/stargate/gateway"
)

// remoteWorker is the gateway's record of one engine worker, read by the
// cluster picker: the requests it holds, the prompt tokens they occupy, and
// which sessions it served last (their prefix is likely still cached there).
type remoteWorker struct {
	limit    int
	inflight map[uint64]int // request -> prompt tokens
	kv       int
	recent   map[uint64]int // session -> tokens it left cached
	order    []uint64       // sessions in recent, oldest first
	blocked  bool           // quarantined: the picker must not prefer it
}

// maxRecentSessions bounds a worker's session memory.
const maxRecentSessions = 4096

func newRemoteWorker(limit int) *remoteWorker {
	return &remoteWorker{limit: limit, inflight: make(map[uint64]int), recent: make(map[uint64]int)}
}

var _ cluster.Worker = (*remoteWorker)(nil)

func (w *remoteWorker) Load() int { return len(w.inflight) }

func (w *remoteWorker) SeqLimit() int {
	if w.blocked {
		return 0
	}
	return w.limit
}

func (w *remoteWorker) CachedPromptAt(_ time.Duration, r *engine.Request) int {
	return w.recent[r.Session]
}

func (w *remoteWorker) KVUsedAt(time.Duration) int { return w.kv }

// start records that request id of session, with prompt tokens, runs here.
func (w *remoteWorker) start(id, session uint64, prompt int) {
	w.inflight[id] = prompt
	w.kv += prompt
	if _, ok := w.recent[session]; !ok {
		if len(w.order) >= maxRecentSessions {
			delete(w.recent, w.order[0])
			w.order = w.order[1:]
		}
		w.order = append(w.order, session)
	}
	w.recent[session] = prompt
}

func (w *remoteWorker) stop(id uint64) {
	w.kv -= w.inflight[id]
	delete(w.inflight, id)
}

// pickWorker runs the cluster picker over the workers, keeping quarantined
// ones out of its preference.
func pickWorker(now time.Duration, session uint64, workers []*remoteWorker, slots *core.Slots) int {
	for i, w := range workers {
		w.blocked = slots.Quarantined(i)
	}
	return cluster.Pick(now, &engine.Request{Session: session}, workers)
}
