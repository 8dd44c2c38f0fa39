package cputime

import (
	"runtime"
	"testing"
)

// TestUsedGrows: burning CPU shows up in Used.
func TestUsedGrows(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("not read on this system")
	}
	start := Used()
	x := uint64(1)
	for range 100_000 { // a few seconds at most; the clock ticks far sooner
		for i := range 100_000 {
			x = x*6364136223846793005 + uint64(i)
		}
		if Used() > start {
			return
		}
	}
	t.Errorf("Used stayed at %v after a busy loop (%d)", start, x)
}
