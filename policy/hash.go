package policy

import (
	"github.com/cespare/xxhash/v2"

	mixer "github.com/stargate-llm/stargate/internal/mix"
)

// KeyOf hashes a backend or session name.
func KeyOf(name string) uint64 { return xxhash.Sum64String(name) }

// mix spreads structured input (counters, xors of two keys) over 64 bits.
func mix(x uint64) uint64 { return mixer.Mix64(x) }

// unit maps a hash to (0,1), never 0 or 1.
func unit(h uint64) float64 { return (float64(h>>11) + 0.5) / (1 << 53) }
