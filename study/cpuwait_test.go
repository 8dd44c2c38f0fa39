package study

import (
	"testing"
	"time"
)

func TestParseSchedstat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want cpuTimes
		ok   bool
	}{
		{"15492500000 59414900000 97181\n", cpuTimes{Run: 15492500 * time.Microsecond, Wait: 59414900 * time.Microsecond}, true},
		{"12 34", cpuTimes{Run: 12, Wait: 34}, true},
		{"", cpuTimes{}, false},
		{"12", cpuTimes{}, false},
		{"x 34 1", cpuTimes{}, false},
		{"-1 34 1", cpuTimes{}, false},
	} {
		got, err := parseSchedstat(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSchedstat(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestReadCPUTimesGrows: where the kernel reports them, this process's run
// time grows while it works.
func TestReadCPUTimesGrows(t *testing.T) {
	before, ok := readCPUTimes()
	if !ok {
		t.Skip("no /proc/self/task/*/schedstat here")
	}
	x := 0
	for i := range 50_000_000 {
		x ^= i * i
	}
	after, _ := readCPUTimes()
	if after.Run <= before.Run {
		t.Fatalf("run %v -> %v, wait %v -> %v (x %d)", before.Run, after.Run, before.Wait, after.Wait, x)
	}
}
