// Package golden compares what a test produced with a file kept under its
// package's testdata, and rewrites the file instead when the test binary
// runs with -update (after a deliberate change, which the commit then
// explains). Tests only: importing it registers the -update flag.
package golden
