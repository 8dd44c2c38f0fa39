package router

import (
	"slices"

	"github.com/stargate-llm/stargate/policy"
)

// Retry is one request's retries before its first byte: the rule the live
// router and the simulator's routers share. A backend that refused the
// request before its first byte (a refused or broken connection, an
// overload answer, a context-length refusal) is never tried again for it;
// the request tries at most maxAttempts backends in all; a context-length
// refusal is retried only if another backend fits the request; a refused
// connection takes the dispatch back and keeps the backend from new
// requests until its next stats message.
//
// Retry decides; the caller carries out its Steps on its router core (the
// simulator keeps a second core for telemetry, so the rule cannot call the
// core itself). The zero value allows no attempt; use NewRetry.
type Retry struct {
	max     int
	skip    int         // exclude[:skip] were excluded from the start
	exclude []BackendID // skipped, then tried, oldest first
}

// NewRetry starts the retries of a request that may try maxAttempts
// backends in all, never one in skip (backends it cannot fit, known before
// the first pick); skip does not count against the attempts.
func NewRetry(maxAttempts int, skip []BackendID) Retry {
	return Retry{max: maxAttempts, skip: len(skip), exclude: slices.Clip(skip)}
}

// Exclude lists the backends the request's next pick must avoid (Ask's
// Exclude): those skipped and those that refused it. The caller must not
// modify it.
func (t *Retry) Exclude() []BackendID { return t.exclude }

// Tried is how many backends refused the request.
func (t *Retry) Tried() int { return len(t.exclude) - t.skip }

// Accept reports whether decision d may be carried out: false for a
// dispatch to a backend the request already tried or skipped (its router
// placed it there after it waited, as no other backend was eligible). The
// caller then takes the dispatch back (Router.Undispatch) and answers the
// client with the last refusal.
func (t *Retry) Accept(d Decision) bool {
	return d.Kind != policy.Dispatch || !slices.Contains(t.exclude, d.Backend)
}

// Refusal is how a backend refused an attempt before its first byte.
type Refusal struct {
	// Kind is Errored (a refused connection, or one that broke before the
	// first byte, or a bad gateway), Overloaded (429 or 503) or TooLong (a
	// context-length refusal).
	Kind ResultKind
	// NeverSent (Errored): the connection was refused; the request never
	// reached the backend's gateway.
	NeverSent bool
	// Uncounted (TooLong): the gateway refused the request before counting
	// it as received (the simulated gateway does; the live one counts it and
	// reports it done).
	Uncounted bool
	// OthersFit (TooLong): another backend may hold the request
	// (Router.OthersFit, asked before the refusal is reported).
	OthersFit bool
}

// Step is what a router does about a refusal, in this order.
type Step struct {
	// Report: tell the core how the attempt ended (Router.OnResult with
	// Result{Kind: the refusal's kind}).
	Report bool
	// Undispatch: take the dispatch back (Router.Undispatch); the gateway
	// will never count it.
	Undispatch bool
	// Disable: the backend takes no new request from this router until its
	// next stats message (Router.SetEligible false, then true on stats).
	Disable bool
	// Again: place the request again, excluding Exclude; otherwise the
	// client gets the refusal.
	Again bool
}

// Refused records that backend b refused the request before its first
// byte, and says what the router does about it.
func (t *Retry) Refused(b BackendID, f Refusal) Step {
	fits := f.Kind != TooLong || f.OthersFit
	var st Step
	switch f.Kind {
	case Errored:
		st.Report = true
		st.Undispatch, st.Disable = f.NeverSent, f.NeverSent
	case Overloaded:
		st.Report = true
	case TooLong:
		// Reported only if another backend fits: otherwise the refusal goes
		// to the client as the request's own fault.
		st.Report, st.Undispatch = fits, f.Uncounted
	}
	t.exclude = append(t.exclude, b)
	st.Again = t.Tried() < t.max && fits
	return st
}
