// Package netsim adds network latency to HTTP calls in-process (Stargate):
// netem is not available everywhere a fleet runs, and a fleet on loopback
// still needs the WAN round trips between its regions.
//
// A Transport delays each request by the one-way latency to its destination
// before sending it, and the response by the same latency before handing it
// back, so a round trip costs two one-way latencies; streamed bytes after the
// headers follow without further delay (they are already shifted). An
// optional jitter adds a uniform random extra delay to each leg.
package netsim

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Transport wraps Base with per-destination latency. It is safe for
// concurrent use once built; Set may be called at any time.
type Transport struct {
	Base http.RoundTripper

	mu      sync.RWMutex
	oneWay  map[string]time.Duration // by host:port
	jitter  map[string]time.Duration
	rng     *rand.Rand
	rngLock sync.Mutex
}

// New returns a Transport over base (http.DefaultTransport if nil) whose
// jitter draws from seed.
func New(base http.RoundTripper, seed uint64) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{Base: base, oneWay: make(map[string]time.Duration), jitter: make(map[string]time.Duration),
		rng: rand.New(rand.NewPCG(seed, 0x6e657473696d))}
}

// Set gives host (host:port) a one-way latency and a jitter bound.
func (t *Transport) Set(host string, oneWay, jitter time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.oneWay[host], t.jitter[host] = oneWay, jitter
}

func (t *Transport) delay(host string) time.Duration {
	t.mu.RLock()
	d, j := t.oneWay[host], t.jitter[host]
	t.mu.RUnlock()
	if j > 0 {
		t.rngLock.Lock()
		d += time.Duration(t.rng.Int64N(int64(j) + 1))
		t.rngLock.Unlock()
	}
	return d
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := sleep(req.Context(), t.delay(req.URL.Host)); err != nil {
		return nil, err
	}
	resp, err := t.Base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if err := sleep(req.Context(), t.delay(req.URL.Host)); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
