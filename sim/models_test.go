package sim

import (
	"testing"

	"github.com/stargate-llm/stargate/router"
)

// With backends that name models, every dispatch goes to a backend that
// serves its session's model, and both models get traffic.
func TestPlacementByModel(t *testing.T) {
	cfg := small("pulsar-waw", 20)
	cfg.Backends[0].Models = []string{"m1"}
	cfg.Backends[1].Models = []string{"m2"}
	cfg.Backends[2].Models = []string{"m1"}
	cfg.RecordDispatches = true
	res := run(t, cfg)
	per := map[string]int{}
	for _, d := range res.Dispatches {
		if !router.Serves(cfg.Backends[d.Backend].Models, d.Model) {
			t.Fatalf("a %q session went to %s, which serves %v", d.Model, cfg.Backends[d.Backend].Name, cfg.Backends[d.Backend].Models)
		}
		per[d.Model]++
	}
	if per["m1"] == 0 || per["m2"] == 0 {
		t.Errorf("dispatches by model %v: both models must get traffic", per)
	}
}

// A fleet whose backends name no model places as before: its dispatches
// name no model.
func TestNoModelsNoChange(t *testing.T) {
	cfg := small("pulsar-waw", 20)
	cfg.RecordDispatches = true
	for _, d := range run(t, cfg).Dispatches {
		if d.Model != "" {
			t.Fatalf("dispatch names model %q in a fleet that names none", d.Model)
		}
	}
}
