package main

import (
	"github.com/spf13/pflag"

	gwcore "github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/serve/gatewayd"
)

// slotModeFlag registers the gateway's --slot-mode (prefixed as
// gatewayFlags does).
func slotModeFlag(f *pflag.FlagSet, mode *string, prefix, what string) {
	f.StringVar(mode, prefix+"slot-mode", string(gwcore.SlotModeEngine), what+
		"default of --"+prefix+"max-inflight-per-worker: engine (LLM engines: the engine's sequence limit, else 25) or bounded (the bounded worker overlap note's workers: 1, and only 1 or 2 accepted); see docs/bounded-overlap.md")
}

// applySlotMode sets cfg's slots by --slot-mode after the flags are parsed.
func applySlotMode(f *pflag.FlagSet, cfg *gatewayd.Config, mode, prefix string) error {
	m, err := gwcore.ParseSlotMode(mode)
	if err != nil {
		return usagef("--%sslot-mode: %v", prefix, err)
	}
	slots, learn, err := m.Apply(cfg.Slots, f.Changed(prefix+"max-inflight-per-worker"))
	if err != nil {
		return usagef("--%sslot-mode %s: %v", prefix, mode, err)
	}
	cfg.Slots = slots
	if !learn && m == gwcore.SlotModeBounded {
		if f.Changed(prefix+"learn-slots") && cfg.LearnSlots {
			return usagef("--%slearn-slots: mode bounded takes its slots from --%smax-inflight-per-worker, not from the engine", prefix, prefix)
		}
		cfg.LearnSlots = false
	}
	return nil
}
