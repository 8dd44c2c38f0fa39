// Package wait sleeps for a while unless a context ends first: the one
// cancellable sleep the live shells (driver, load generator, in-process
// network delays, live studies) share.
package wait
