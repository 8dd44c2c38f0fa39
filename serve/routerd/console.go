package routerd

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/report"
	"github.com/stargate-llm/stargate/serve/wire"
)

// This file is the operator console (GET /console, Config.Console): one
// embedded page that shows the router's view live, fed by Server-Sent
// Events (GET /console/events) from a sampler that reads the same admin
// JSON as GET /v1/stargate/backends, and a bounded ring of events fed where
// backends change.

//go:embed console.html
var consoleHTML []byte

// Console timing and bounds.
const (
	// ConsoleInterval is how often the console samples the router and
	// sends every open page an update: at most two a second.
	ConsoleInterval = 500 * time.Millisecond
	// consoleHistory is how many samples the chart keeps (three minutes).
	consoleHistory = 360
	// consoleShareWindow is how many samples the dispatch share spans (30 s).
	consoleShareWindow = 60
	// consoleEvents bounds the event ring; consoleSentEvents is how many of
	// the latest events every update carries.
	consoleEvents, consoleSentEvents = 256, 60
	// maxConsoleClients bounds the open event streams.
	maxConsoleClients = 32
	// consoleRetryMillis tells a page how soon to reconnect after the
	// router goes away (EventSource's retry field).
	consoleRetryMillis = 1000
)

// Kinds of console events.
const (
	EventRegistered  = "registered"
	EventRestarted   = "restarted"
	EventState       = "state"
	EventDrain       = "drain"
	EventUndrain     = "undrain"
	EventQuarantine  = "quarantine"
	EventRelease     = "release"
	EventLearned     = "learned_limit"
	EventAdvertised  = "advertised_limit"
	EventRefused     = "connection_refused"
	EventFallback    = "telemetry_fallback"
	EventRemoved     = "removed"
	EventTelemetryOK = "telemetry_restored"
)

// ConsoleEvent is one change the console lists.
type ConsoleEvent struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Backend string    `json:"backend"`
	Kind    string    `json:"kind"`
	Text    string    `json:"text"`
}

// eventRing keeps the latest consoleEvents events. It has its own lock, so
// that it may be fed with the router's lock held (lock order: Server.mu,
// then eventRing.mu).
type eventRing struct {
	mu   sync.Mutex
	buf  []ConsoleEvent
	next uint64
}

func (r *eventRing) add(backend, kind, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	ev := ConsoleEvent{Seq: r.next, Time: time.Now().UTC(), Backend: backend, Kind: kind, Text: fmt.Sprintf(format, args...)}
	if len(r.buf) < consoleEvents {
		r.buf = append(r.buf, ev)
		return
	}
	copy(r.buf, r.buf[1:])
	r.buf[len(r.buf)-1] = ev
}

// latest returns up to n of the newest events, oldest first.
func (r *eventRing) latest(n int) []ConsoleEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ConsoleEvent(nil), r.buf[max(len(r.buf)-n, 0):]...)
}

// Events returns up to n of the router's latest console events, oldest
// first.
func (s *Server) Events(n int) []ConsoleEvent { return s.con.events.latest(n) }

// watched is what the console last saw of a backend, to tell changes.
type watched struct {
	state    string
	learned  int
	refused  bool
	fallback bool
}

// console is the router's console state.
type console struct {
	events eventRing
	// seen is guarded by Server.mu (watchLocked).
	seen map[string]watched

	mu      sync.Mutex
	history []consolePoint
	last    []byte        // the latest update, as an SSE data line's JSON
	wake    chan struct{} // closed and replaced at every update
	done    bool          // the sampler has stopped
	clients int
	prev    map[string]uint64 // dispatch totals at the previous sample
}

func newConsole() *console {
	return &console{seen: make(map[string]watched), wake: make(chan struct{}), prev: make(map[string]uint64)}
}

// consolePoint is one sample of the chart: per backend id, the dispatches
// since the previous sample and the reported TTFT p95.
type consolePoint struct {
	Time       time.Time          `json:"time"`
	Dispatches map[string]uint64  `json:"dispatches"`
	TTFTP95    map[string]float64 `json:"ttft_p95_seconds"`
}

// consoleUpdate is one SSE update: the admin JSON, the shares of recent
// dispatches, the newest chart point and the latest events.
type consoleUpdate struct {
	AdminBackends
	// DispatchShare is each backend's share of this router's dispatches
	// over the last ShareWindowSeconds, 0-1, by id.
	DispatchShare      map[string]float64 `json:"dispatch_share_ratio"`
	ShareWindowSeconds float64            `json:"share_window_seconds"`
	IntervalSeconds    float64            `json:"interval_seconds"`
	Point              consolePoint       `json:"point"`
	Events             []ConsoleEvent     `json:"events"`
}

// noteStats records, before a gateway's stats m replace b's, the changes
// they bring. Called with mu held.
func (s *Server) noteStats(b *backend, m *wire.Stats, registered, restarted bool) {
	ev := &s.con.events
	switch {
	case registered:
		ev.add(m.Backend, EventRegistered, "%d workers, capacity %d requests, region %q", m.Workers, m.Capacity, m.Region)
		if m.Quarantined > 0 {
			ev.add(m.Backend, EventQuarantine, "%d of %d workers quarantined", m.Quarantined, m.Workers)
		}
		return
	case restarted:
		ev.add(m.Backend, EventRestarted, "gateway restarted (new boot)")
	}
	if m.Quarantined > b.last.Quarantined {
		ev.add(m.Backend, EventQuarantine, "%d of %d workers quarantined (was %d)", m.Quarantined, m.Workers, b.last.Quarantined)
	} else if m.Quarantined < b.last.Quarantined {
		ev.add(m.Backend, EventRelease, "%d of %d workers quarantined (was %d): released", m.Quarantined, m.Workers, b.last.Quarantined)
	}
	if b.last.MaxModelLen != m.MaxModelLen && b.last.MaxModelLen > 0 {
		ev.add(m.Backend, EventAdvertised, "advertised context %d tokens (was %d)", m.MaxModelLen, b.last.MaxModelLen)
	}
}

// watchLocked compares each backend's lifecycle state, learned context
// limit, refused connection and telemetry fallback with what it saw last,
// and records the changes. Called with mu held, from Run's liveness tick.
func (s *Server) watchLocked(now time.Duration) {
	if s.core == nil {
		return
	}
	c := s.con
	live := make(map[string]bool, len(s.backends))
	for _, st := range s.core.Backends(now) {
		b, ok := s.backends[st.ID]
		if !ok {
			continue
		}
		live[b.name] = true
		w := watched{state: st.StateName, learned: st.LearnedLimit, refused: st.Refused,
			fallback: b.last.Signals != nil && !b.last.Signals.Hardware}
		old, ok := c.seen[b.name]
		c.seen[b.name] = w
		if !ok {
			if w.state != "ready" {
				c.events.add(b.name, EventState, "%s", w.state)
			}
			continue
		}
		if w.state != old.state {
			c.events.add(b.name, EventState, "%s -> %s", old.state, w.state)
		}
		if w.learned != old.learned && w.learned > 0 {
			c.events.add(b.name, EventLearned, "learned context limit %d tokens (advertised %d)", w.learned, b.last.MaxModelLen)
		}
		if w.refused && !old.refused {
			c.events.add(b.name, EventRefused, "connection refused: no requests until its next stats")
		}
		if w.fallback != old.fallback {
			if w.fallback {
				c.events.add(b.name, EventFallback, "scoring without hardware signals: %s", b.last.HardwareError)
			} else {
				c.events.add(b.name, EventTelemetryOK, "hardware signals back")
			}
		}
	}
	for name := range c.seen {
		if !live[name] {
			delete(c.seen, name)
			c.events.add(name, EventRemoved, "removed from this router")
		}
	}
}

// consoleLoop samples the router every ConsoleInterval for the open pages
// and the chart's history, until ctx ends.
func (s *Server) consoleLoop(ctx context.Context) {
	tick := time.NewTicker(ConsoleInterval)
	defer tick.Stop()
	defer func() {
		c := s.con
		c.mu.Lock()
		defer c.mu.Unlock()
		c.done = true
		close(c.wake)
	}()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sample takes one console update and wakes every open page.
func (s *Server) sample() {
	view := s.Admin()
	c := s.con
	c.mu.Lock()
	defer c.mu.Unlock()
	pt := consolePoint{Time: view.Time, Dispatches: make(map[string]uint64, len(view.Backends)), TTFTP95: make(map[string]float64, len(view.Backends))}
	seen := make(map[string]uint64, len(view.Backends))
	for _, b := range view.Backends {
		d := b.DispatchesTotal
		if p, ok := c.prev[b.ID]; ok && d >= p {
			d -= p // else the gateway restarted and counts from zero, or it is new
		} else if !ok {
			d = 0
		}
		pt.Dispatches[b.ID] = d
		pt.TTFTP95[b.ID] = b.TTFTP95Seconds
		seen[b.ID] = b.DispatchesTotal
	}
	c.prev = seen
	c.history = append(c.history, pt)
	if n := len(c.history); n > consoleHistory {
		c.history = append(c.history[:0], c.history[n-consoleHistory:]...)
	}
	u := consoleUpdate{AdminBackends: view, Point: pt, Events: c.events.latest(consoleSentEvents),
		ShareWindowSeconds: (consoleShareWindow * ConsoleInterval).Seconds(), IntervalSeconds: ConsoleInterval.Seconds()}
	u.DispatchShare = dispatchShare(c.history[max(len(c.history)-consoleShareWindow, 0):])
	data, err := json.Marshal(u)
	if err != nil {
		return // the update has only finite numbers and strings; nothing to tell a page
	}
	c.last = data
	close(c.wake)
	c.wake = make(chan struct{})
}

// dispatchShare is each backend's share of the dispatches in points.
func dispatchShare(points []consolePoint) map[string]float64 {
	sums := map[string]uint64{}
	var total uint64
	for _, p := range points {
		for id, n := range p.Dispatches {
			sums[id] += n
			total += n
		}
	}
	out := make(map[string]float64, len(sums))
	for id, n := range sums {
		out[id] = 0
		if total > 0 {
			out[id] = float64(n) / float64(total)
		}
	}
	return out
}

// consolePage is the page, with the report's palette as CSS colours.
var consolePage = sync.OnceValue(func() []byte {
	var css, js strings.Builder
	for i, c := range report.Palette() {
		fmt.Fprintf(&css, "--c%d:%s;", i, c)
		if i > 0 {
			js.WriteByte(',')
		}
		fmt.Fprintf(&js, "%q", c)
	}
	page := bytes.Replace(consoleHTML, []byte("/*PALETTE_CSS*/"), []byte(css.String()), 1)
	return bytes.Replace(page, []byte("/*PALETTE_JS*/"), []byte(js.String()), 1)
})

func (s *Server) serveConsole(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// The page loads nothing from elsewhere: its own inline script and style.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(consolePage())
}

// consoleEvents streams updates to one page: first the chart's history and
// the latest update, then every update as the sampler takes it, until the
// page or the router goes away.
func (s *Server) consoleEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "console: this connection cannot stream", http.StatusInternalServerError)
		return
	}
	c := s.con
	c.mu.Lock()
	if c.clients >= maxConsoleClients {
		c.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("console: %d pages are open already; close one", maxConsoleClients), http.StatusServiceUnavailable)
		return
	}
	if c.done {
		c.mu.Unlock()
		http.Error(w, "console: the router is stopping", http.StatusServiceUnavailable)
		return
	}
	c.clients++
	history, err := json.Marshal(c.history)
	last, wake := c.last, c.wake
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.clients--
		c.mu.Unlock()
	}()
	if err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "retry: %d\nevent: history\ndata: %s\n\n", consoleRetryMillis, history)
	if last != nil {
		fmt.Fprintf(&buf, "event: update\ndata: %s\n\n", last)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return
	}
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		}
		c.mu.Lock()
		last, wake = c.last, c.wake
		done := c.done
		c.mu.Unlock()
		if done {
			return
		}
		buf.Reset()
		fmt.Fprintf(&buf, "event: update\ndata: %s\n\n", last)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		flusher.Flush()
	}
}
