package policy

import "github.com/cespare/xxhash/v2"

// KeyOf hashes a backend or session name.
func KeyOf(name string) uint64 { return xxhash.Sum64String(name) }

// mix is a 64-bit finalizer (splitmix64): it turns structured input (counters,
// xors of two keys) into well-spread bits.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// unit maps a hash to (0,1), never 0 or 1.
func unit(h uint64) float64 { return (float64(h>>11) + 0.5) / (1 << 53) }
