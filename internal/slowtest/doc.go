// Package slowtest marks the tests that take minutes on two cores or start
// whole live fleets and processes. They run when the environment sets
// STARGATE_SLOW_TESTS=1, as .ci/run does, and are skipped otherwise, so the
// README's `go test -race ./...` stays within a few minutes on a busy
// two-core machine while CI still runs everything. -short skips them always.
//
// It also holds the window of the scale benchmarks (ScaleWindow): 240 s +
// 240 s, or shorter through STARGATE_SCALE_WINDOW for a run to profile.
package slowtest
