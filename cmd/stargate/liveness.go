package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/stargate-llm/stargate/config"
)

// livenessFlags registers stargate sim's failure-detection flags, which
// override a fleet file's router.heartbeat_ttl and gateway.heartbeat_interval.
func livenessFlags(f *pflag.FlagSet, ttl, interval *time.Duration) {
	f.DurationVar(ttl, "heartbeat-ttl", 0, "routers fail a backend not heard from for this long (default: the fleet file's router.heartbeat_ttl; 0 there: liveness off)")
	f.DurationVar(interval, "heartbeat-interval", 0, "most time between two stats messages of a gateway (default: the fleet file's gateway.heartbeat_interval, 500ms)")
}

// applyLiveness sets the flags livenessFlags registered on fleet, where given.
func applyLiveness(f *pflag.FlagSet, fleet *config.Fleet, ttl, interval time.Duration) error {
	if f.Changed("heartbeat-ttl") {
		if ttl < 0 {
			return usagef("--heartbeat-ttl must be >= 0 (0: liveness off), got %v", ttl)
		}
		fleet.Router.HeartbeatTTL = ttl
	}
	if f.Changed("heartbeat-interval") {
		if interval <= 0 {
			return usagef("--heartbeat-interval must be > 0, got %v", interval)
		}
		fleet.Gateway.HeartbeatInterval = interval
	}
	return nil
}
