package routerd

import (
	"bytes"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxModelLabels bounds the model label's values: the first models the
// backends list get their own, any other model (and a request that names
// none, or a model only a backend listing none serves) is "other".
const maxModelLabels = 64

// otherModel is the model label of a model outside the known set.
const otherModel = "other"

// latency holds the router's latency histograms, by backend and model.
type latency struct {
	ttft, itl, e2e *prometheus.HistogramVec

	mu    sync.Mutex
	known map[string]bool
}

func newLatency(reg prometheus.Registerer) *latency {
	l := &latency{known: map[string]bool{},
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stargate_router_ttft_seconds",
			Help:    "Time from the request's arrival at the router to the first byte of its answer (the first event of a stream), retries included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"backend", "model"}),
		itl: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stargate_router_inter_token_seconds",
			Help:    "Time between a stream's successive events (tokens) as the router forwards them; events that arrive together share the gap.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 13)}, []string{"backend", "model"}),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stargate_router_request_duration_seconds",
			Help:    "Time from the request's arrival at the router to the end of its answer, for requests a backend answered.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}, []string{"backend", "model"}),
	}
	reg.MustRegister(l.ttft, l.itl, l.e2e)
	return l
}

// model is the model label of model: itself if a backend lists it by name
// and the label set has room, else otherModel.
func (l *latency) model(t *table, model string) string {
	if model == "" {
		return otherModel
	}
	listed := false
	for _, b := range t.list {
		for _, m := range b.models {
			if m == model {
				listed = true
				break
			}
		}
	}
	if !listed {
		return otherModel
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.known[model] {
		if len(l.known) >= maxModelLabels {
			return otherModel
		}
		l.known[model] = true
	}
	return model
}

// forget drops a backend's series when it leaves the router.
func (l *latency) forget(backend string) {
	for _, v := range []*prometheus.HistogramVec{l.ttft, l.itl, l.e2e} {
		v.DeletePartialMatch(prometheus.Labels{"backend": backend})
	}
}

// timingWriter watches an attempt's answer on its way to the client: when
// its first byte left, and the gaps between a stream's events.
type timingWriter struct {
	http.ResponseWriter
	itl   prometheus.Observer // nil: not a stream
	first time.Time
	last  time.Time
}

var sseData = []byte("data: ")

func (w *timingWriter) Write(p []byte) (int, error) {
	now := time.Now()
	if w.first.IsZero() {
		w.first = now
	} else if w.itl != nil {
		if n := bytes.Count(p, sseData) - bytes.Count(p, []byte("data: [DONE]")); n > 0 {
			gap := now.Sub(w.last).Seconds() / float64(n)
			for range n {
				w.itl.Observe(gap)
			}
		}
	}
	w.last = now
	return w.ResponseWriter.Write(p)
}

func (w *timingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *timingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe records a request a backend answered: its time to first byte
// and its end-to-end time since arrival.
func (l *latency) observe(w *timingWriter, arrived time.Time, backend, model string) {
	if w.first.IsZero() {
		return
	}
	l.ttft.WithLabelValues(backend, model).Observe(w.first.Sub(arrived).Seconds())
	l.e2e.WithLabelValues(backend, model).Observe(time.Since(arrived).Seconds())
}
