// Package client holds the client's rules for one turn: a TTFT SLO, a timeout
// per attempt and a bounded number of attempts. A Turn is a small state
// machine the shells (simulator or live driver) feed with what happened to its
// current attempt; it says whether to retry and produces the turn's record.
//
// A failed attempt (rejected as overloaded, an error, or a timeout) is retried
// after RetryBackoff x the number of attempts so far, while attempts remain;
// the last failure fails the turn. The TTFT is measured from the first
// attempt's send, so retries count against the SLO.
package client
