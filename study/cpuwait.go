package study

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is what this process's threads have spent on a core and waiting
// for one (Linux: the first two fields of /proc/self/task/*/schedstat,
// summed over the threads alive when read).
type cpuTimes struct {
	Run, Wait time.Duration
}

// readCPUTimes reads this process's cpuTimes; ok is false where the kernel
// does not report them.
func readCPUTimes() (cpuTimes, bool) {
	files, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil || len(files) == 0 {
		return cpuTimes{}, false
	}
	var total cpuTimes
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that exited meanwhile
		}
		t, err := parseSchedstat(string(b))
		if err != nil {
			return cpuTimes{}, false
		}
		total.Run += t.Run
		total.Wait += t.Wait
	}
	return total, true
}

// parseSchedstat reads one thread's schedstat line: nanoseconds on a core,
// nanoseconds runnable but waiting for one, and the time slices run.
func parseSchedstat(s string) (cpuTimes, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return cpuTimes{}, fmt.Errorf("schedstat %q: want at least two fields", s)
	}
	run, err1 := strconv.ParseInt(f[0], 10, 64)
	wait, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || run < 0 || wait < 0 {
		return cpuTimes{}, fmt.Errorf("schedstat %q: want non-negative nanoseconds", s)
	}
	return cpuTimes{Run: time.Duration(run), Wait: time.Duration(wait)}, nil
}

// loadAverage is the one-minute load average (Linux /proc/loadavg); ok is
// false where there is none.
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}
