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

func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		var at []time.Duration
		time.AfterFunc(3500*time.Millisecond, cancel)
		Every(ctx, time.Second, func() { at = append(at, time.Since(start)) })
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
		if len(at) != len(want) || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] {
			t.Fatalf("called at %v, want %v", at, want)
		}
		if time.Since(start) != 3500*time.Millisecond {
			t.Fatalf("returned at %v, want when ctx ended (3.5s)", time.Since(start))
		}
	})
}
