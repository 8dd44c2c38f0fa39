package wait

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		if !For(ctx, time.Second) || time.Since(start) != time.Second {
			t.Fatalf("waited %v, want a live context after 1s", time.Since(start))
		}
		if !For(ctx, -time.Second) || !Until(ctx, start) || time.Since(start) != time.Second {
			t.Fatal("a wait into the past must return at once with a live context")
		}
		time.AfterFunc(time.Second, cancel)
		if For(ctx, time.Hour) || time.Since(start) != 2*time.Second {
			t.Fatalf("cancelled after 1s: returned true or at %v", time.Since(start))
		}
		if For(ctx, 0) {
			t.Fatal("an ended context must report false even without waiting")
		}
	})
}
