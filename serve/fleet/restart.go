package fleet

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/stargate-llm/stargate/serve/engined"
)

// RestartEngine starts backend b's engine again after KillEngine, as a new
// process on the same address (nothing of the old one survives) that loads
// its model for loadTime first (engine.Config.LoadTime: /health 503, no
// model listed). Its gateway, which lived on, sees it come back.
func (f *Fleet) RestartEngine(b int, loadTime time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b < 0 || b >= len(f.killed) {
		return fmt.Errorf("fleet: no backend %d (the fleet has %d)", b, len(f.killed))
	}
	if f.killed[b] {
		return fmt.Errorf("fleet: backend %d was killed whole (KillBackend); only an engine killed alone (KillEngine) restarts", b)
	}
	ec := f.engineCfg[b]
	ec.LoadTime = loadTime
	es, err := engined.New(ec)
	if err != nil {
		return fmt.Errorf("fleet: restarting backend %d's engine: %w", b, err)
	}
	addr := hostOf(f.EngineURLs[b])
	var ln net.Listener
	for range 50 { // the killed engine's port may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("fleet: restarting backend %d's engine on %s: %w", b, addr, err)
	}
	f.Engines[b] = es
	f.engineHS[b] = f.serve(ln, es.Handler())
	ctx, stop := context.WithCancel(f.runCtx)
	f.stopEngine[b] = stop
	f.wg.Add(1)
	go func() { defer f.wg.Done(); es.Run(ctx) }()
	return nil
}
