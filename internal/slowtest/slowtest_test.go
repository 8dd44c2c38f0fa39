package slowtest

import (
	"testing"
)

// recorder is a testing.TB that records a skip instead of ending the test.
type recorder struct {
	testing.TB
	skipped string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) { r.skipped = format }

func TestSkipFollowsTheEnvironment(t *testing.T) {
	tests := []struct {
		env  string
		skip bool
	}{
		{"", true},
		{"0", true},
		{"yes", true},
		{"1", false},
	}
	for _, tt := range tests {
		t.Run("env="+tt.env, func(t *testing.T) {
			t.Setenv(Env, tt.env)
			r := &recorder{TB: t}
			Skip(r, "a test")
			if got := r.skipped != ""; got != tt.skip && !testing.Short() {
				t.Errorf("%s=%q: skipped %v, want %v", Env, tt.env, got, tt.skip)
			}
			if Enabled() == tt.skip && !testing.Short() {
				t.Errorf("%s=%q: Enabled() = %v", Env, tt.env, Enabled())
			}
		})
	}
}
