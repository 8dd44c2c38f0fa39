package slowtest

import (
	"os"
	"testing"
)

// Env is the environment variable that turns the slow tests on ("1").
const Env = "STARGATE_SLOW_TESTS"

// Enabled reports whether slow tests run: Env is "1" and -short is not set.
func Enabled() bool { return !testing.Short() && os.Getenv(Env) == "1" }

// Skip skips t, a slow test doing what, unless slow tests run.
func Skip(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s", what)
	}
	if os.Getenv(Env) != "1" {
		t.Skipf("slow test (%s): run it with %s=1, as .ci/run does", what, Env)
	}
}
