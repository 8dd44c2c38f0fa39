// Package poll is the tests' wait for a condition that other goroutines or
// processes make true: a live server's counts, a process's metrics, a link's
// state. Tests that can run on a fake clock use testing/synctest instead.
package poll
