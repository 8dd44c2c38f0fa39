package poll

import (
	"testing"
	"time"
)

// Until checks cond until it holds, and fails the test if it still does
// not after limit. It checks often at first and backs off to every 50 ms,
// so a condition that costs a request does not load a busy machine.
func Until(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for pause := 5 * time.Millisecond; !cond(); pause = min(2*pause, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(pause)
	}
}
