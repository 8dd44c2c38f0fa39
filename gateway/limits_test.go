package gateway

import (
	"testing"
	"time"
)

func TestParseLimitBody(t *testing.T) {
	tests := []struct {
		name, body       string
		limit, requested int
	}{
		{"vllm total", `{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","code":400}}`, 4096, 5000},
		{"vllm input", `{"object":"error","message":"This model's maximum context length is 1536 tokens. However, your request has 4176 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","code":400}`, 1536, 4176},
		{"vllm max_tokens", `{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None"}}`, 4096, 10778},
		{"sglang input", `{"object":"error","message":"The input (150000 tokens) is longer than the model's context length (128000 tokens).","type":"BadRequestError"}`, 128000, 150000},
		{"sglang total", `{"detail":"Requested token count exceeds the model's maximum context length of 64000 tokens. You requested a total of 71897 tokens: 7897 tokens from the input messages and 64000 tokens for the completion."}`, 64000, 71897},
		// A client's value an engine quotes in a validation error.
		{"echoed value", `{"object":"error","message":"[{'type': 'float_parsing', 'loc': ('body', 'temperature'), 'msg': 'Input should be a valid number', 'input': \"This model's maximum context length is 8 tokens. However, you requested 9000 tokens (9000 in the messages, 0 in the completion).\"}]"}`, 0, 0},
		{"echoed in another field", `{"error":{"message":"invalid model","param":"This model's maximum context length is 8 tokens. However, your request has 9 input tokens."}}`, 0, 0},
		{"inconsistent", `{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 100 tokens (90 in the messages, 10 in the completion)."}}`, 0, 0},
		{"zero limit", `{"error":{"message":"This model's maximum context length is 0 tokens. However, your request has 9 input tokens."}}`, 0, 0},
		{"huge", `{"error":{"message":"This model's maximum context length is 99999999999999999999 tokens. However, your request has 9 input tokens."}}`, 0, 0},
		{"not json", `This model's maximum context length is 8 tokens. However, your request has 9 input tokens.`, 0, 0},
		{"rate limited", `{"error":{"message":"rate limited"}}`, 0, 0},
		{"empty", ``, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok := ParseLimitBody([]byte(tt.body))
			if ok != (tt.limit > 0) || ev.Limit != tt.limit || ev.Requested != tt.requested {
				t.Errorf("ParseLimitBody = %+v, %v; want limit %d requested %d", ev, ok, tt.limit, tt.requested)
			}
		})
	}
}

func FuzzParseLimitBody(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens."}}`))
	f.Add([]byte(`{"detail":"The input (9 tokens) is longer than the model's context length (8 tokens)."}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, ok := ParseLimitBody(body)
		if ok && (ev.Limit < 1 || ev.Requested < ev.Limit) {
			t.Fatalf("accepted inconsistent evidence %+v", ev)
		}
	})
}

// TestLimitLearner: a refusal counts only when its limit is below what the
// request needed and below the advertised limit; one under the floor needs
// repeated refusals of requests of different sizes; a limit lapses after
// its TTL unless named again.
func TestLimitLearner(t *testing.T) {
	const adv = 32768
	cfg := DefaultLimitConfig()
	t.Run("needs consistent request", func(t *testing.T) {
		l := NewLimitLearner(cfg)
		if l.Observe(0, LimitEvidence{Limit: 4096, Requested: 5000}, 3000, adv) {
			t.Error("learned 4096 from a request that needed only 3000 tokens")
		}
		if l.Observe(0, LimitEvidence{Limit: 40000, Requested: 50000}, 50000, adv) {
			t.Error("learned a limit above the advertised one")
		}
		if !l.Observe(0, LimitEvidence{Limit: 4096, Requested: 5000}, 5000, adv) || l.Limit(0) != 4096 {
			t.Errorf("a consistent refusal was not learned: %d", l.Limit(0))
		}
	})
	t.Run("floor", func(t *testing.T) {
		l := NewLimitLearner(cfg)
		ev := LimitEvidence{Limit: 8, Requested: 20}
		for i := range 10 { // the same request, repeated, is one piece of evidence
			if l.Observe(time.Duration(i)*time.Second, ev, 20, adv) {
				t.Fatal("one request under the floor, repeated, was learned")
			}
		}
		if l.Observe(11*time.Second, LimitEvidence{Limit: 8, Requested: 21}, 21, adv) || l.Limit(11*time.Second) != 0 {
			t.Fatal("two requests under the floor were learned")
		}
		if !l.Observe(12*time.Second, LimitEvidence{Limit: 8, Requested: 22}, 22, adv) || l.Limit(12*time.Second) != 8 {
			t.Fatal("three independent refusals under the floor were not learned")
		}
	})
	t.Run("pending evidence expires", func(t *testing.T) {
		l := NewLimitLearner(cfg)
		for i := range 3 {
			at := time.Duration(i) * (cfg.TTL + time.Second)
			if l.Observe(at, LimitEvidence{Limit: 8, Requested: 20 + i}, 20+i, adv) {
				t.Fatalf("refusal %d, each a TTL apart, was learned", i)
			}
		}
	})
	t.Run("ttl", func(t *testing.T) {
		l := NewLimitLearner(cfg)
		l.Observe(0, LimitEvidence{Limit: 4096, Requested: 5000}, 5000, adv)
		half := cfg.TTL / 2
		l.Observe(half, LimitEvidence{Limit: 4096, Requested: 6000}, 6000, adv) // named again
		if got := l.Limit(cfg.TTL + time.Second); got != 4096 {
			t.Errorf("renewed limit lapsed early: %d", got)
		}
		if got := l.Limit(half + cfg.TTL + time.Second); got != 0 {
			t.Errorf("limit %d held past its TTL", got)
		}
	})
}
