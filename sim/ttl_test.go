package sim

import (
	"testing"
	"time"

	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/telemetry"
)

// TestSettableTTLFailsSilentBackend: with the Solyx AI Grid paper's 500 ms
// heartbeat TTL, every router fails a killed (silent) backend within one TTL
// plus one heartbeat interval of its death, dispatches nothing to it after
// that, and fails no healthy backend; a shorter TTL detects sooner than the
// default one on the same run.
func TestSettableTTLFailsSilentBackend(t *testing.T) {
	kill := 30*time.Second + 123*time.Millisecond
	const ttl = 500 * time.Millisecond
	detect := func(ttl time.Duration) (worst time.Duration, res *Result) {
		cfg := withTelemetry("pressure", Fault{Kind: FaultKill, Backends: []int{0}, At: kill})
		cfg.Router = router.Config{HeartbeatTTL: ttl}
		res = run(t, cfg)
		for r, re := range res.Routers {
			st := re.Backends[0]
			if st.State != telemetry.Failed {
				t.Fatalf("TTL %v: router %d sees the killed backend as %s", ttl, r, st.StateName)
			}
			worst = max(worst, st.Since-kill)
			for b := 1; b < len(re.Backends); b++ {
				if re.Backends[b].State == telemetry.Failed {
					t.Errorf("TTL %v: router %d failed healthy backend %d", ttl, r, b)
				}
			}
		}
		return worst, res
	}
	worst, res := detect(ttl)
	tick := cfgHeartbeat(withTelemetry("pressure"))
	if worst < 0 || worst > ttl+tick {
		t.Errorf("TTL %v: killed backend Failed %v after the kill, want within one TTL plus one heartbeat interval (%v)", ttl, worst, ttl+tick)
	}
	for _, d := range res.Dispatches {
		if d.Backend == 0 && d.At >= kill+worst {
			t.Fatalf("TTL %v: dispatch to the failed backend at %v, after it was Failed at %v", ttl, d.At, kill+worst)
		}
	}
	def, _ := detect(router.DefaultHeartbeatTTL)
	if worst >= def {
		t.Errorf("TTL %v detected after %v, the default %v after %v: want the shorter TTL sooner", ttl, worst, router.DefaultHeartbeatTTL, def)
	}
	t.Logf("detection: TTL %v after %v, TTL %v after %v", ttl, worst, router.DefaultHeartbeatTTL, def)
}

// cfgHeartbeat is the longest gap between two stats messages of a gateway.
func cfgHeartbeat(cfg Config) time.Duration { return cfg.Gateway.HeartbeatInterval }
