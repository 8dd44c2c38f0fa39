//go:build race

package httplimit_test

// raceEnabled: the race detector slows parsing tenfold and changes what
// the heap holds, so heap measurements skip under it.
const raceEnabled = true
