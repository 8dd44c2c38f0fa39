package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
)

// TestLivenessSettable: a fleet file sets the routers' heartbeat TTL and the
// gateways' heartbeat interval; leaving them out keeps liveness off and the
// 500 ms heartbeat; bad values and unknown keys are errors that name the key.
func TestLivenessSettable(t *testing.T) {
	cases := []struct {
		name, yaml    string
		ttl, interval time.Duration
		err           string
	}{
		{name: "default", yaml: "", ttl: 0, interval: 500 * time.Millisecond},
		{name: "solyx", yaml: "router: {heartbeat_ttl: 500ms}\ngateway: {heartbeat_interval: 250ms}\n",
			ttl: 500 * time.Millisecond, interval: 250 * time.Millisecond},
		{name: "ours", yaml: "router: {heartbeat_ttl: 750ms}\n", ttl: router.DefaultHeartbeatTTL, interval: 500 * time.Millisecond},
		{name: "negative ttl", yaml: "router: {heartbeat_ttl: -1s}\n", err: "heartbeat_ttl"},
		{name: "zero interval", yaml: "gateway: {heartbeat_interval: 0s}\n", err: "heartbeat_interval"},
		{name: "unknown key", yaml: "router: {heartbeat_tll: 500ms}\n", err: "heartbeat_tll"},
		{name: "not a duration", yaml: "router: {heartbeat_ttl: soon}\n", err: "invalid duration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("live.yaml", []byte(oneRegion+c.yaml))
			if err == nil {
				cfg, cfgErr := f.SimConfig(studyRun, policy.NewRegistry())
				if cfgErr == nil && c.err == "" {
					if cfg.Router.HeartbeatTTL != c.ttl || cfg.Gateway.HeartbeatInterval != c.interval {
						t.Errorf("ttl %v interval %v, want %v and %v", cfg.Router.HeartbeatTTL, cfg.Gateway.HeartbeatInterval, c.ttl, c.interval)
					}
					return
				}
				err = cfgErr
			}
			if c.err == "" {
				t.Fatalf("unexpected error: %v", err)
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %v, want one naming %q", err, c.err)
			}
		})
	}
}
