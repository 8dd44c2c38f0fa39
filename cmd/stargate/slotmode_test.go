package main

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/stargate-llm/stargate/serve/gatewayd"
)

// TestApplySlotMode: --slot-mode bounded gives one submission per worker
// unless the operator says two, stops learning slots from the engine, and
// refuses more than two or --learn-slots; engine mode changes nothing.
func TestApplySlotMode(t *testing.T) {
	cases := []struct {
		args      []string
		want      int
		wantLearn bool
		bad       bool
	}{
		{args: nil, want: 25, wantLearn: true},
		{args: []string{"--slot-mode", "bounded"}, want: 1},
		{args: []string{"--slot-mode", "bounded", "--max-inflight-per-worker", "2"}, want: 2},
		{args: []string{"--slot-mode", "bounded", "--max-inflight-per-worker", "3"}, bad: true},
		{args: []string{"--slot-mode", "bounded", "--learn-slots"}, bad: true},
		{args: []string{"--slot-mode", "batched"}, bad: true},
		{args: []string{"--slot-mode", "engine", "--max-inflight-per-worker", "8"}, want: 8, wantLearn: true},
	}
	for _, c := range cases {
		cfg := gatewayd.DefaultConfig()
		var mode string
		f := pflag.NewFlagSet("gateway", pflag.ContinueOnError)
		gatewayFlags(f, &cfg, "", "")
		slotModeFlag(f, &mode, "", "")
		if err := f.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		err := applySlotMode(f, &cfg, mode, "")
		if c.bad {
			if err == nil {
				t.Errorf("%v: no error", c.args)
			}
			continue
		}
		if err != nil || cfg.Slots.MaxInflightPerWorker != c.want || cfg.LearnSlots != c.wantLearn {
			t.Errorf("%v: slots %d learn %v err %v, want %d and %v", c.args, cfg.Slots.MaxInflightPerWorker, cfg.LearnSlots, err, c.want, c.wantLearn)
		}
	}
}
