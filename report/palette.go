package report

import "slices"

// Palette returns the charts' colours in series order (the Okabe-Ito
// colour-blind friendly palette), for other pages that should look the same,
// such as the router's console.
func Palette() []string { return slices.Clone(palette) }
