// Package mix holds the one 64-bit mixing function the project uses to turn
// structured input (counters, seeds, xors of keys) into well-spread bits.
package mix
