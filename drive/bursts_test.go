package drive

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestBursts starts Count sessions at once at every burst, and tells Started
// the run's time zero before any request.
func TestBursts(t *testing.T) {
	var mu sync.Mutex
	firstAt := map[uint64]time.Time{} // burst session -> its first request
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseUint(r.Header.Get("X-Session-ID"), 10, 64)
		mu.Lock()
		if _, ok := firstAt[id]; !ok && id > burstIDs {
			firstAt[id] = time.Now()
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n"))
	}))
	defer stub.Close()
	cfg := shortConfig(stub.URL)
	cfg.RPS = 0.5
	cfg.Bursts = Bursts{At: 100 * time.Millisecond, Every: 700 * time.Millisecond, Count: 3}
	var t0 time.Time
	cfg.Started = func(at time.Time) { t0 = at }
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if t0.IsZero() {
		t.Fatal("Started was not called")
	}
	mu.Lock()
	defer mu.Unlock()
	// Bursts at 0.1, 0.8, 1.5 and 2.2 s of a 2.5 s run.
	if len(firstAt) != 12 {
		t.Fatalf("%d burst sessions, want 12", len(firstAt))
	}
	for id, at := range firstAt {
		k := (id - burstIDs - 1) / 3
		want := cfg.Bursts.At + time.Duration(k)*cfg.Bursts.Every
		if got := at.Sub(t0); got < want {
			t.Errorf("session %d of burst %d started at %v, before its burst at %v", id, k, got, want)
		}
	}
	bad := cfg
	bad.Bursts.Every = -time.Second
	if bad.Validate() == nil {
		t.Error("a negative burst interval was accepted")
	}
}
