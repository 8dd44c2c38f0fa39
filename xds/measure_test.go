package xds

import "testing"

// TestBuildTime: building three endpoints' snapshots takes some time.
func TestBuildTime(t *testing.T) {
	d, err := BuildTime(eps3(1, 2, 3), 5)
	if err != nil || d <= 0 {
		t.Fatalf("build time %v, %v; want > 0", d, err)
	}
}
