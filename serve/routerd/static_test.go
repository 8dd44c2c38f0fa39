package routerd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stargate-llm/stargate/policy"
)

// A static backend gets no gateway stats; the router must count its own
// requests there as they end, or the backend looks full for good after
// capacity requests in all.
func TestStaticBackendFreesSlotsAsRequestsEnd(t *testing.T) {
	const capacity = 2
	for _, tt := range []struct {
		name, policy string
		parallel     int
	}{
		{"pulsar-waw one at a time", "pulsar-waw", 1},
		{"pulsar-waw at capacity", "pulsar-waw", capacity},
		{"least-request at capacity", "least-request", capacity},
	} {
		t.Run(tt.name, func(t *testing.T) {
			backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
			}))
			defer backend.Close()
			cfg := DefaultConfig()
			cfg.Policy = tt.policy
			cfg.Static = []StaticBackend{{Name: "b", URL: backend.URL, Capacity: capacity}}
			srv, err := New(cfg, policy.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { srv.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			front := httptest.NewServer(srv.Handler())
			defer front.Close()

			const perWorker = 5 * capacity
			var wg sync.WaitGroup
			errs := make(chan error, tt.parallel*perWorker)
			for range tt.parallel {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range perWorker {
						resp, err := http.Post(front.URL+"/v1/chat/completions", "application/json",
							strings.NewReader(`{"stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
						if err != nil {
							errs <- err
							continue
						}
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							errs <- fmt.Errorf("%s: %s", resp.Status, b)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			c := srv.Counts()
			if want := uint64(tt.parallel * perWorker); c.Completed != want || c.Accepted != want {
				t.Errorf("accepted %d, completed %d, want %d each (failed %v, rejected %v)", c.Accepted, c.Completed, want, c.Failed, c.Rejected)
			}
			bs := srv.Backends()
			if len(bs) != 1 || bs[0].Stats.Active != 0 || bs[0].Pending != 0 {
				t.Errorf("after every request ended the backend shows %+v, want nothing active or pending", bs)
			}
		})
	}
}
