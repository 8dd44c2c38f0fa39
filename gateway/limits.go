package gateway

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// LimitEvidence is what one engine refusal says about a backend's context
// limit: the limit it names and the tokens it says the request needed.
type LimitEvidence struct {
	Limit     int
	Requested int
}

// limitForms are the engines' own context-length refusals, anchored at the
// start of the error message and matched whole up to the numbers they
// carry. A client's value that an engine repeats inside another error
// (vLLM's validation errors quote the offending input) never starts the
// message, so it never matches. Each form names which submatch is the limit
// and which the tokens requested.
var limitForms = []struct {
	re               *regexp.Regexp
	limit, requested int
}{
	// vLLM, prompt plus completion over the limit.
	{regexp.MustCompile(`^This model's maximum context length is (\d{1,9}) tokens\. However, you requested (\d{1,10}) tokens \((\d{1,9}) in the messages, (\d{1,9}) in the completion\)\.`), 1, 2},
	// vLLM, prompt alone at or over the limit.
	{regexp.MustCompile(`^This model's maximum context length is (\d{1,9}) tokens\. However, your request has (\d{1,9}) input tokens\.`), 1, 2},
	// vLLM, max_tokens too large for what the prompt leaves.
	{regexp.MustCompile(`^'max_tokens' or 'max_completion_tokens' is too large: (\d{1,9})\. This model's maximum context length is (\d{1,9}) tokens and your request has (\d{1,9}) input tokens \(`), 2, 0},
	// SGLang, prompt alone over the limit.
	{regexp.MustCompile(`^The input \((\d{1,9}) tokens\) is longer than the model's context length \((\d{1,9}) tokens\)\.`), 2, 1},
	// SGLang, prompt plus completion over the limit.
	{regexp.MustCompile(`^Requested token count exceeds the model's maximum context length of (\d{1,9}) tokens\. You requested a total of (\d{1,10}) tokens: `), 1, 2},
}

// ParseLimitMessage reads an engine's context-length refusal out of its
// error message. It accepts only the exact forms of vLLM and SGLang (see
// limitForms), and only when the message is consistent with itself (it
// says the request needed more than the limit).
func ParseLimitMessage(msg string) (LimitEvidence, bool) {
	msg = strings.TrimSpace(msg)
	for _, f := range limitForms {
		m := f.re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		limit, err := strconv.Atoi(m[f.limit])
		if err != nil {
			return LimitEvidence{}, false
		}
		var requested int
		if f.requested > 0 {
			requested, err = strconv.Atoi(m[f.requested])
		} else { // vLLM's max_tokens form: completion (1) plus input (3)
			var out, in int
			out, err = strconv.Atoi(m[1])
			if err == nil {
				in, err = strconv.Atoi(m[3])
			}
			requested = out + in
		}
		if err != nil || limit < 1 || requested < limit {
			return LimitEvidence{}, false
		}
		return LimitEvidence{Limit: limit, Requested: requested}, true
	}
	return LimitEvidence{}, false
}

// ParseLimitBody reads an engine's context-length refusal out of a 400
// answer's body: a JSON error whose message (OpenAI's error.message, vLLM's
// and SGLang's top-level message, or FastAPI's detail) is one of the
// engines' forms (ParseLimitMessage). Anything else is no evidence.
func ParseLimitBody(body []byte) (LimitEvidence, bool) {
	var e struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
		Detail  any    `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil {
		return LimitEvidence{}, false
	}
	msg := e.Message
	if e.Error != nil {
		msg = e.Error.Message
	} else if d, ok := e.Detail.(string); ok && msg == "" {
		msg = d
	}
	return ParseLimitMessage(msg)
}

// LimitConfig is the rule by which a backend's context limit is learned
// from its refusals.
type LimitConfig struct {
	// MinFraction: a limit below MinFraction of the advertised max_model_len
	// is believed only after Confirmations refusals naming it, each for a
	// request of a different size, within TTL.
	MinFraction   float64
	Confirmations int
	// TTL is how long a learned limit holds without a refusal that names it
	// again; then the advertised limit applies, and the next refusal teaches
	// it anew.
	TTL time.Duration
}

// DefaultLimitConfig: a limit under 1/32 of the advertised one needs three
// independent refusals, and a learned limit lapses after ten minutes.
func DefaultLimitConfig() LimitConfig {
	return LimitConfig{MinFraction: 1.0 / 32, Confirmations: 3, TTL: 10 * time.Minute}
}

// Validate reports what is wrong with the rule.
func (c LimitConfig) Validate() error {
	if c.MinFraction < 0 || c.MinFraction > 1 || c.Confirmations < 1 || c.Confirmations > maxConfirmations || c.TTL <= 0 {
		return fmt.Errorf("limit rule: min fraction %g must be 0-1, confirmations %d 1-%d, TTL %v > 0",
			c.MinFraction, c.Confirmations, maxConfirmations, c.TTL)
	}
	return nil
}

const maxConfirmations = 8

// LimitLearner keeps one backend's learned context limit by LimitConfig's
// rule. A gateway's admission core and each router's view of a backend keep
// one each. Its memory is fixed: one limit and at most maxConfirmations
// pending refusals.
type LimitLearner struct {
	cfg     LimitConfig
	limit   int
	at      time.Duration // when the limit was last named
	pending [maxConfirmations]pendingLimit
}

type pendingLimit struct {
	limit, requested int
	at               time.Duration
}

// NewLimitLearner returns a learner with cfg's rule (DefaultLimitConfig if
// cfg is the zero value).
func NewLimitLearner(cfg LimitConfig) LimitLearner {
	if cfg == (LimitConfig{}) {
		cfg = DefaultLimitConfig()
	}
	return LimitLearner{cfg: cfg}
}

// Observe weighs a refusal at now: ev is what it says, needed the tokens
// this side counted for the request (prompt plus the completion it asked
// for; the engine's count may differ a little), advertised the backend's
// max_model_len (0: unknown). It reports whether the learned limit changed.
//
// A refusal counts only if its limit is below what the request needed (an
// engine refuses only what does not fit), not above the advertised limit,
// and below what was learned already.
// A limit below the floor (MinFraction of advertised) is held pending until
// Confirmations refusals of requests of different sizes name it.
func (l *LimitLearner) Observe(now time.Duration, ev LimitEvidence, needed, advertised int) bool {
	if l.cfg == (LimitConfig{}) {
		l.cfg = DefaultLimitConfig()
	}
	// A limit equal to the advertised one still counts: a router's
	// advertised limit is the gateway's report, which may already carry it.
	if ev.Limit < 1 || needed <= ev.Limit || (advertised > 0 && ev.Limit > advertised) {
		return false
	}
	cur := l.Limit(now)
	if cur > 0 && ev.Limit >= cur {
		if ev.Limit == cur {
			l.at = now // named again: it holds for another TTL
		}
		return false
	}
	if floor := int(l.cfg.MinFraction * float64(advertised)); ev.Limit < floor && !l.confirm(now, ev) {
		return false
	}
	l.limit, l.at = ev.Limit, now
	l.pending = [maxConfirmations]pendingLimit{}
	return true
}

// confirm records a refusal under the floor and reports whether enough
// refusals of different request sizes within TTL now name its limit.
func (l *LimitLearner) confirm(now time.Duration, ev LimitEvidence) bool {
	n, free, oldest := 0, -1, 0
	for i, p := range l.pending[:l.cfg.Confirmations] {
		switch {
		case p.limit == 0 || now-p.at > l.cfg.TTL:
			if free < 0 {
				free = i
			}
			continue
		case p.limit == ev.Limit && p.requested == ev.Requested:
			return false // the same request again is not independent
		case p.limit == ev.Limit:
			n++
		}
		if l.pending[i].at < l.pending[oldest].at {
			oldest = i
		}
	}
	if n+1 >= l.cfg.Confirmations {
		return true
	}
	if free < 0 {
		free = oldest
	}
	l.pending[free] = pendingLimit{limit: ev.Limit, requested: ev.Requested, at: now}
	return false
}

// Limit is the learned limit at now (0: none, or it lapsed).
func (l *LimitLearner) Limit(now time.Duration) int {
	if l.limit == 0 || now-l.at > l.cfg.TTL {
		return 0
	}
	return l.limit
}

// Reset forgets what was learned (a backend back from the dead).
func (l *LimitLearner) Reset() { *l = LimitLearner{cfg: l.cfg} }
