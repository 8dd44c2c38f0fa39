package netsim

import (
	"maps"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stargate-llm/stargate/internal/wait"
)

// Transport wraps Base with per-destination latency. It is safe for
// concurrent use once built; Set may be called at any time.
type Transport struct {
	Base http.RoundTripper

	// paths by host:port, an immutable map replaced whole by SetPath (rare)
	// and read without a lock on every request.
	paths   atomic.Pointer[map[string]Path]
	writeMu sync.Mutex // serialises SetPath
	rng     *rand.Rand
	rngLock sync.Mutex
}

// New returns a Transport over base (http.DefaultTransport if nil) whose
// jitter draws from seed.
func New(base http.RoundTripper, seed uint64) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{Base: base, rng: rand.New(rand.NewPCG(seed, 0x6e657473696d))}
	t.paths.Store(&map[string]Path{})
	return t
}

// Path is the delay added on the way to one destination, on each leg.
type Path struct {
	OneWay time.Duration `json:"one_way"`
	Jitter time.Duration `json:"jitter"`
	// Exponential draws the jitter from an exponential distribution of
	// mean Jitter instead of uniformly from [0, Jitter].
	Exponential bool `json:"exponential"`
}

// Set gives host (host:port) a one-way latency and a uniform jitter bound.
func (t *Transport) Set(host string, oneWay, jitter time.Duration) {
	t.SetPath(host, Path{OneWay: oneWay, Jitter: jitter})
}

// SetPath replaces host's (host:port) path.
func (t *Transport) SetPath(host string, p Path) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	next := maps.Clone(*t.paths.Load())
	next[host] = p
	t.paths.Store(&next)
}

// Path returns host's path (the zero Path if it has none).
func (t *Transport) Path(host string) Path { return (*t.paths.Load())[host] }

func (t *Transport) delay(host string) time.Duration {
	p := t.Path(host)
	d := p.OneWay
	if p.Jitter > 0 {
		t.rngLock.Lock()
		if p.Exponential {
			d += time.Duration(t.rng.ExpFloat64() * float64(p.Jitter))
		} else {
			d += time.Duration(t.rng.Int64N(int64(p.Jitter) + 1))
		}
		t.rngLock.Unlock()
	}
	return d
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !wait.For(req.Context(), t.delay(req.URL.Host)) {
		return nil, req.Context().Err()
	}
	resp, err := t.Base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if !wait.For(req.Context(), t.delay(req.URL.Host)) {
		resp.Body.Close()
		return nil, req.Context().Err()
	}
	return resp, nil
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it keeps any, so that a service closing its client closes them through
// the delay.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
