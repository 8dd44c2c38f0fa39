package main

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/stargate-llm/stargate/config"
)

// TestApplyLiveness: stargate sim's --heartbeat-ttl and --heartbeat-interval
// override the fleet's values only when given, and bad values are refused.
func TestApplyLiveness(t *testing.T) {
	cases := []struct {
		args          []string
		ttl, interval time.Duration
		bad           bool
	}{
		{args: nil, ttl: 0, interval: 500 * time.Millisecond},
		{args: []string{"--heartbeat-ttl", "500ms"}, ttl: 500 * time.Millisecond, interval: 500 * time.Millisecond},
		{args: []string{"--heartbeat-ttl", "500ms", "--heartbeat-interval", "250ms"}, ttl: 500 * time.Millisecond, interval: 250 * time.Millisecond},
		{args: []string{"--heartbeat-ttl", "-1s"}, bad: true},
		{args: []string{"--heartbeat-interval", "0s"}, bad: true},
	}
	for _, c := range cases {
		fleet, err := config.Load("small")
		if err != nil {
			t.Fatal(err)
		}
		var ttl, interval time.Duration
		f := pflag.NewFlagSet("sim", pflag.ContinueOnError)
		livenessFlags(f, &ttl, &interval)
		if err := f.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		err = applyLiveness(f, fleet, ttl, interval)
		if c.bad {
			if err == nil {
				t.Errorf("%v: no error", c.args)
			}
			continue
		}
		if err != nil || fleet.Router.HeartbeatTTL != c.ttl || fleet.Gateway.HeartbeatInterval != c.interval {
			t.Errorf("%v: ttl %v interval %v err %v, want %v and %v", c.args, fleet.Router.HeartbeatTTL, fleet.Gateway.HeartbeatInterval, err, c.ttl, c.interval)
		}
	}
}
