package routerd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
)

// TestDiscoveryChurnUnderLoad sends requests from several goroutines while
// discovery adds and removes backends under them, and one backend refuses
// every request (so requests retry on others). A request must never see a
// backend by a position that changed under it: the router must not panic,
// must not wedge (every request answers, and one sent after the churn
// completes), and its counts must add up.
func TestDiscoveryChurnUnderLoad(t *testing.T) {
	const (
		senders  = 8
		requests = 100 // per sender
		cycles   = 2000
	)
	ok := &echoBackend{}
	busy := &echoBackend{status: http.StatusServiceUnavailable}
	var urls []string
	for _, h := range []http.Handler{ok, ok, busy, ok} {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	lists := [][]Discovered{
		{{"gw-0", urls[0], true}, {"gw-1", urls[1], true}, {"gw-2", urls[2], true}},
		{{"gw-2", urls[2], true}},
		{{"gw-1", urls[1], true}, {"gw-2", urls[2], true}, {"gw-3", urls[3], true}},
		{{"gw-0", urls[0], true}, {"gw-3", urls[3], false}},
		{{"gw-3", urls[3], true}, {"gw-0", urls[0], true}},
	}
	for _, pol := range []string{"pulsar-waw", "round-robin", "pressure"} {
		t.Run(pol, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Policy = pol
			cfg.Discovery = true
			cfg.HTTP2 = false
			r, err := New(cfg, policy.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			if err := r.SetDiscovered(lists[0]); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			go func() { r.Run(ctx); close(ran) }()
			wedged := false
			defer func() {
				cancel()
				if !wedged {
					<-ran
				}
			}()
			h := r.Handler()

			var wg sync.WaitGroup
			statuses := make(chan int, senders*requests)
			panics := make(chan any, senders+1)
			for range senders {
				wg.Go(func() {
					defer func() {
						if p := recover(); p != nil {
							panics <- p
						}
					}()
					for i := 0; i < requests; i++ {
						statuses <- serve(h, okBody).Code
					}
				})
			}
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						panics <- p
					}
				}()
				for i := range cycles {
					if err := r.SetDiscovered(lists[i%len(lists)]); err != nil {
						panics <- err
						return
					}
				}
			})
			if !waitFor(&wg, 60*time.Second) {
				wedged = true
				for len(panics) > 0 {
					t.Errorf("panic: %v", <-panics)
				}
				t.Fatal("requests still unanswered after 60 s: the router is wedged")
			}
			close(statuses)
			close(panics)
			for p := range panics {
				t.Errorf("panic: %v", p)
			}
			n := 0
			for code := range statuses {
				n++
				switch code {
				case http.StatusOK, http.StatusServiceUnavailable, http.StatusTooManyRequests:
				default:
					t.Errorf("a request got %d", code)
				}
			}
			if n != senders*requests {
				t.Errorf("%d requests answered, want %d", n, senders*requests)
			}

			// After the churn the router still serves.
			if err := r.SetDiscovered(lists[0][:2]); err != nil {
				t.Fatal(err)
			}
			done := make(chan int, 1)
			go func() { done <- serve(h, okBody).Code }()
			select {
			case code := <-done:
				if code != http.StatusOK {
					t.Errorf("after the churn: %d, want 200", code)
				}
			case <-time.After(30 * time.Second):
				wedged = true
				t.Fatal("a request after the churn got no answer in 30 s: the router is wedged")
			}
			c := r.Counts()
			want := uint64(senders*requests + 1)
			var ended uint64
			for _, v := range c.Failed {
				ended += v
			}
			for _, v := range c.Rejected {
				ended += v
			}
			if c.Accepted != want || c.Completed+ended != want {
				t.Errorf("accepted %d, completed %d, failed or rejected %d; want %d accepted and ended", c.Accepted, c.Completed, ended, want)
			}
		})
	}
}

// serve sends one completion straight to handler h.
func serve(h http.Handler, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// waitFor waits for wg, at most d (a hang guard); false if it timed out.
func waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestHealthFailsWhenRunLoopStuck: /health answers 503 once the run loop has
// not gone round for longer than its bound (here it waits on the router's
// lock, held as a panic without a deferred unlock once left it), and ok
// again when the loop moves.
func TestHealthFailsWhenRunLoopStuck(t *testing.T) {
	_, r := startRouterWith(t, nil, nil, &echoBackend{})
	r.stuckAfter = 300 * time.Millisecond
	h := r.Handler()
	health := func() int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health", nil))
		return w.Code
	}
	// eventually polls health until it answers want (a hang guard, not a
	// timing assertion).
	eventually := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for health() != want {
			if time.Now().After(deadline) {
				t.Fatalf("/health never answered %d", want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	eventually(http.StatusOK)
	r.mu.Lock()
	eventually(http.StatusServiceUnavailable)
	r.mu.Unlock()
	eventually(http.StatusOK)
}
