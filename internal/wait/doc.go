// Package wait sleeps for a while unless a context ends first: the one
// cancellable sleep the live shells (driver, load generator, in-process
// network delays, live studies) share, and the one periodic loop (Every)
// the gateway's scrape and fence loops run on.
package wait
