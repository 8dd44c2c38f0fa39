package drive

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/internal/wait"
)

// Bursts start Count new sessions at once at At and every Every after it
// (Every zero: once), on top of the Poisson arrivals: the resilience study's
// burst phase. The zero value adds none.
type Bursts struct {
	At, Every time.Duration
	Count     int
}

// burstIDs is where burst sessions' ids start, far above the arrivals'.
const burstIDs = 1 << 40

func (b Bursts) validate() error {
	if b.Count == 0 {
		return nil
	}
	if b.Count < 0 || b.Count > 100_000 || b.At < 0 || b.Every < 0 {
		return fmt.Errorf("bursts: want 0 <= count <= 100000, at >= 0 and every >= 0, got %d, %v and %v", b.Count, b.At, b.Every)
	}
	return nil
}

// startBursts plays the bursts until ctx ends, in one goroutine counted in wg.
func (d *driver) startBursts(ctx context.Context, wg *sync.WaitGroup) {
	b := d.cfg.Bursts
	if b.Count == 0 {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		id := uint64(burstIDs)
		for at := b.At; ; at += b.Every {
			if !wait.For(ctx, at-d.now()) {
				return
			}
			for range b.Count {
				id++
				sid, target := id, int(id%uint64(len(d.cfg.Targets)))
				wg.Add(1)
				go func() {
					defer wg.Done()
					d.session(ctx, d.cfg.Workload.NewSession(d.cfg.Seed, sid), target)
				}()
			}
			if b.Every == 0 {
				return
			}
		}
	}()
}
