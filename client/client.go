package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/metrics"
)

// Config is the client's behaviour.
type Config struct {
	TTFTSLO        time.Duration `yaml:"ttft_slo" json:"ttft_slo"`
	AttemptTimeout time.Duration `yaml:"attempt_timeout" json:"attempt_timeout"`
	MaxAttempts    int           `yaml:"max_attempts" json:"max_attempts"`
	RetryBackoff   time.Duration `yaml:"retry_backoff" json:"retry_backoff"`
}

// DefaultConfig returns the routing study's client.
func DefaultConfig() Config {
	return Config{TTFTSLO: 10 * time.Second, AttemptTimeout: 30 * time.Second, MaxAttempts: 3, RetryBackoff: 100 * time.Millisecond}
}

// Validate reports what is wrong with a configuration.
func (c Config) Validate() error {
	var errs []error
	if c.TTFTSLO <= 0 {
		errs = append(errs, fmt.Errorf("ttft_slo must be > 0, got %v", c.TTFTSLO))
	}
	if c.AttemptTimeout <= 0 {
		errs = append(errs, fmt.Errorf("attempt_timeout must be > 0, got %v", c.AttemptTimeout))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max_attempts must be >= 1, got %d", c.MaxAttempts))
	}
	if c.RetryBackoff < 0 {
		errs = append(errs, fmt.Errorf("retry_backoff must be >= 0, got %v", c.RetryBackoff))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}

// Turn is one turn's progress. Record holds its result so far.
type Turn struct {
	cfg    *Config
	Record metrics.TurnRecord
	done   bool
}

// NewTurn starts a turn at now; call Attempt to send its first attempt. A
// Turn is a value so that a caller can keep one per session without
// allocating; it must not be copied once in use.
func (c *Config) NewTurn(now time.Duration, rec metrics.TurnRecord) Turn {
	rec.Start, rec.Backend = now, -1
	return Turn{cfg: c, Record: rec}
}

// Done reports whether the turn has ended.
func (t *Turn) Done() bool { return t.done }

// Attempt records that an attempt is sent; it returns the attempt's deadline.
func (t *Turn) Attempt(now time.Duration) time.Duration {
	t.Record.Attempts++
	return now + t.cfg.AttemptTimeout
}

// FirstToken records the current attempt's first token.
func (t *Turn) FirstToken(now time.Duration) { t.Record.FirstToken = now }

// Complete ends the turn successfully.
func (t *Turn) Complete(now time.Duration, backend, cachedTokens, outputTokens int) {
	t.done = true
	t.Record.End, t.Record.Completed = now, true
	t.Record.Backend, t.Record.CachedTokens, t.Record.OutputTokens = backend, cachedTokens, outputTokens
}

// Failure says how an attempt failed.
type Failure uint8

// Failure kinds.
const (
	// Rejected: refused by admission as overloaded.
	Rejected Failure = iota + 1
	// Errored: failed for another reason.
	Errored
	// TimedOut: the attempt ran past its timeout.
	TimedOut
	// TooLong: no backend can take a request this long; the turn fails at
	// once, without a retry.
	TooLong
	// Invalid: refused as a bad request (a prompt over the backend's
	// context length); the answer says not to retry (x-should-retry:
	// false), so the turn fails at once.
	Invalid
)

func (f Failure) String() string {
	switch f {
	case Rejected:
		return "overloaded"
	case Errored:
		return "error"
	case TimedOut:
		return "timeout"
	case TooLong:
		return "too_long"
	case Invalid:
		return "invalid"
	}
	return "unknown"
}

// Fail records a failed attempt. If attempts remain it returns when to send
// the next one and retry = true; otherwise the turn has failed.
func (t *Turn) Fail(now time.Duration, f Failure, backend int) (retryAt time.Duration, retry bool) {
	t.Record.FirstToken = 0
	if backend >= 0 {
		t.Record.Backend = backend
	}
	if f == Rejected {
		t.Record.Rejections++
	}
	if t.Record.Attempts < t.cfg.MaxAttempts && f != TooLong && f != Invalid {
		return now + time.Duration(t.Record.Attempts)*t.cfg.RetryBackoff, true
	}
	t.done = true
	t.Record.End, t.Record.Completed, t.Record.Reason = now, false, f.String()
	return 0, false
}
