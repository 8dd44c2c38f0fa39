package routerd

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// countBackend answers every chat completion and counts them.
type countBackend struct{ n atomic.Int64 }

func (c *countBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	c.n.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprint(w, `{"choices":[{"message":{"content":"ok"}}]}`)
}

// Two pools, short (a, b: up to 1,024 tokens) and long (c): short prompts
// reach only a and b, long ones only c, whatever the policy; a pool whose
// backends are missing falls back to the whole fleet.
func TestPoolsByLengthLive(t *testing.T) {
	a, b, c := &countBackend{}, &countBackend{}, &countBackend{}
	url, srv := startRouterWith(t, func(cfg *Config) {
		cfg.Policy = "pulsar-waw"
		cfg.Pools = []Pool{{Name: "short", MaxTokens: 1024, Backends: []string{"a", "b"}},
			{Name: "long", MaxTokens: 1 << 20, Backends: []string{"c"}}}
	}, nil, a, b, c)
	short := `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	long := fmt.Sprintf(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":%q}]}`, strings.Repeat("many words here ", 1000))
	for i := range 20 {
		for _, body := range []string{short, long} {
			resp, text := call(t, url, body, map[string]string{"X-Session-ID": fmt.Sprintf("s%d", i)})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, text)
			}
		}
	}
	if na, nb, nc := a.n.Load(), b.n.Load(), c.n.Load(); na+nb != 20 || nc != 20 {
		t.Fatalf("a %d + b %d short requests, c %d long: want 20 and 20", na, nb, nc)
	}
	if got := srv.PoolPicks(); got["short"] != 20 || got["long"] != 20 || got[FallbackPool] != 0 {
		t.Errorf("pool picks %v: want 20 short, 20 long", got)
	}

	// The short pool's only backend never registered: short requests go
	// anywhere rather than wait for it.
	d, e := &countBackend{}, &countBackend{}
	url, srv = startRouterWith(t, func(cfg *Config) {
		cfg.Policy = "round-robin"
		cfg.Pools = []Pool{{Name: "short", MaxTokens: 1024, Backends: []string{"gone"}},
			{Name: "long", MaxTokens: 1 << 20, Backends: []string{"a", "b"}}}
	}, nil, d, e)
	for range 10 {
		if resp, text := call(t, url, short, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("fallback: %d %s", resp.StatusCode, text)
		}
	}
	if d.n.Load()+e.n.Load() != 10 || srv.PoolPicks()[FallbackPool] != 10 {
		t.Errorf("fallback: %d + %d served, picks %v: want 10 placed on the whole fleet", d.n.Load(), e.n.Load(), srv.PoolPicks())
	}
}

// A pool that names a model takes that model's requests, short or long;
// other models go by length among the pools that take every model.
func TestPoolsByModelLive(t *testing.T) {
	a, b, c := &countBackend{}, &countBackend{}, &countBackend{}
	url, srv := startRouterWith(t, func(cfg *Config) {
		cfg.Pools = []Pool{{Name: "short", MaxTokens: 1024, Backends: []string{"a"}},
			{Name: "long", MaxTokens: 1 << 20, Backends: []string{"b"}},
			{Name: "big", MaxTokens: 1 << 20, Models: []string{"llama-70b"}, Backends: []string{"c"}}}
	}, nil, a, b, c)
	for _, model := range []string{"llama-70b", "llama-8b"} {
		for range 5 {
			body := fmt.Sprintf(`{"model":%q,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, model)
			if resp, text := call(t, url, body, nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s", model, resp.StatusCode, text)
			}
		}
	}
	if a.n.Load() != 5 || c.n.Load() != 5 || b.n.Load() != 0 {
		t.Fatalf("a %d, b %d, c %d: want llama-8b's 5 short prompts on short, llama-70b's 5 on big", a.n.Load(), b.n.Load(), c.n.Load())
	}
	long := fmt.Sprintf(`{"model":"llama-70b","max_tokens":8,"messages":[{"role":"user","content":%q}]}`, strings.Repeat("many words here ", 1000))
	if resp, text := call(t, url, long, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("long: %d %s", resp.StatusCode, text)
	}
	longer := strings.Replace(long, "llama-70b", "llama-8b", 1)
	if resp, text := call(t, url, longer, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("long: %d %s", resp.StatusCode, text)
	}
	if b.n.Load() != 1 || c.n.Load() != 6 {
		t.Errorf("long prompts: b %d, c %d: want llama-70b's on big, llama-8b's on long", b.n.Load(), c.n.Load())
	}
	if got := srv.PoolPicks(); got["short"] != 5 || got["big"] != 6 || got["long"] != 1 {
		t.Errorf("pool picks %v", got)
	}
}

func TestPoolsValidate(t *testing.T) {
	for _, tc := range []struct {
		pools []Pool
		want  string
	}{
		{[]Pool{{Name: "", MaxTokens: 1, Backends: []string{"a"}}}, "empty, repeated or reserved"},
		{[]Pool{{Name: "p", MaxTokens: 1, Backends: []string{"a"}}, {Name: "p", MaxTokens: 2, Backends: []string{"b"}}}, "repeated"},
		{[]Pool{{Name: FallbackPool, MaxTokens: 1, Backends: []string{"a"}}}, "reserved"},
		{[]Pool{{Name: "p", MaxTokens: 0, Backends: []string{"a"}}}, "max_tokens must be >= 1"},
		{[]Pool{{Name: "p", MaxTokens: 1}}, "list its backends"},
		{[]Pool{{Name: "p", MaxTokens: 1, Backends: []string{"a"}}, {Name: "q", MaxTokens: 2, Backends: []string{"a"}}}, "belongs to one pool"},
	} {
		errs := validatePools(tc.pools)
		if len(errs) == 0 || !strings.Contains(fmt.Sprint(errs), tc.want) {
			t.Errorf("validatePools(%+v) = %v, want an error with %q", tc.pools, errs, tc.want)
		}
	}
	if errs := validatePools([]Pool{{Name: "p", MaxTokens: 1, Backends: []string{"a"}}}); len(errs) != 0 {
		t.Errorf("a good pool: %v", errs)
	}
}
