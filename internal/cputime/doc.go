// Package cputime reads the CPU time the process has used, for benchmarks
// that must report cost on a machine shared with other work: wall time per
// operation grows with the machine's load, CPU time much less.
package cputime
