//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Used is the user plus system CPU time of the whole process so far; zero if
// the system does not tell.
func Used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
