package gateway

import (
	"errors"
	"fmt"
)

// SlotMode names where a gateway's max_inflight_per_worker default comes
// from: which default fits depends on what a worker is.
type SlotMode string

// Slot modes.
const (
	// SlotModeEngine fits LLM engines (vLLM, SGLang, the mock engine): a
	// worker batches many sequences continuously, so its slots are its
	// sequence limit (learned from the engine where it says it, else
	// DefaultSlotsConfig's 25); one or two submissions would leave it
	// mostly idle.
	SlotModeEngine SlotMode = "engine"
	// SlotModeBounded fits the bounded worker overlap note's workers: a
	// worker runs one submission's stages serially and a shared GPU
	// batcher gains from a second outstanding submission only up to a
	// point. Its conservative default is one submission per worker (the
	// note's public template) and it accepts only 1 or 2.
	SlotModeBounded SlotMode = "bounded"
)

// BoundedDefaultInflight and BoundedMaxInflight are SlotModeBounded's
// default and largest max_inflight_per_worker.
const (
	BoundedDefaultInflight = 1
	BoundedMaxInflight     = 2
)

// ErrBadSlotMode marks an unknown slot mode or a setting its mode refuses.
var ErrBadSlotMode = errors.New("gateway: bad slot mode")

// ParseSlotMode reads a slot mode's name.
func ParseSlotMode(s string) (SlotMode, error) {
	switch m := SlotMode(s); m {
	case SlotModeEngine, SlotModeBounded:
		return m, nil
	}
	return "", fmt.Errorf("%w %q: want %q (LLM engines) or %q (one or two submissions per worker)", ErrBadSlotMode, s, SlotModeEngine, SlotModeBounded)
}

// Apply returns c under mode m: set says whether the operator gave
// max_inflight_per_worker; if not, the mode's default replaces it. learn
// says whether the slots may still be learned from the engine (never in
// SlotModeBounded, whose bound is the operator's).
func (m SlotMode) Apply(c SlotsConfig, set bool) (out SlotsConfig, learn bool, err error) {
	switch m {
	case SlotModeEngine:
		return c, !set, nil
	case SlotModeBounded:
		if !set {
			c.MaxInflightPerWorker = BoundedDefaultInflight
		}
		if c.MaxInflightPerWorker < 1 || c.MaxInflightPerWorker > BoundedMaxInflight {
			return c, false, fmt.Errorf("%w: mode %q accepts max_inflight_per_worker 1 or %d, got %d (use mode %q for more)",
				ErrBadSlotMode, m, BoundedMaxInflight, c.MaxInflightPerWorker, SlotModeEngine)
		}
		return c, false, nil
	}
	_, err = ParseSlotMode(string(m))
	return c, false, err
}
