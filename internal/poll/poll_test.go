package poll

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		time.Sleep(20 * time.Millisecond)
		n.Store(1)
	}()
	Until(t, 5*time.Second, "the flag", func() bool { return n.Load() == 1 })
}

// recorder is a testing.TB that records a Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r) // Fatalf does not return
}

func TestUntilFailsAfterTheLimit(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if p := recover(); p != r {
				panic(p)
			}
		}()
		Until(r, 30*time.Millisecond, "nothing", func() bool { return false })
	}()
	if r.failed == "" || time.Since(start) < 30*time.Millisecond {
		t.Errorf("failed %q after %v; want a failure after the 30 ms limit", r.failed, time.Since(start))
	}
}
