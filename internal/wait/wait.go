package wait

import (
	"context"
	"time"
)

// For waits d and reports whether ctx is still live: false as soon as ctx
// ends. A d of zero or less does not wait.
func For(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Until waits until at (see For).
func Until(ctx context.Context, at time.Time) bool { return For(ctx, time.Until(at)) }

// Every calls f every d, the first time d from now, until ctx ends; a call
// that overruns d delays the next (ticks are dropped, as time.Ticker's).
func Every(ctx context.Context, d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f()
	}
}
