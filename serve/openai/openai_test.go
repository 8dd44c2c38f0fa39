package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestPromptTokens(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		chat   bool
		tokens int
		err    string
	}{
		{name: "one message", chat: true, body: `{"messages":[{"role":"user","content":"abcdefgh"}]}`, tokens: 4 + 2},
		{name: "parts", chat: true, body: `{"messages":[{"role":"system","content":"abcd"},{"role":"user","content":[{"type":"text","text":"abcde"}]}]}`, tokens: 4 + 1 + 4 + 2},
		{name: "no messages", chat: true, body: `{"messages":[]}`, err: "at least one message"},
		{name: "bad role", chat: true, body: `{"messages":[{"role":"robot","content":"x"}]}`, err: "unknown role"},
		{name: "image part", chat: true, body: `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, err: "only text"},
		{name: "prompt", body: `{"prompt":"abcdefghi"}`, tokens: 3},
		{name: "prompt list", body: `{"prompt":["abcd"]}`, tokens: 1},
		{name: "empty prompt", body: `{"prompt":""}`, err: "empty"},
		{name: "prompt numbers", body: `{"prompt":[1,2]}`, err: "must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req Request
			if err := json.Unmarshal([]byte(tt.body), &req); err != nil {
				t.Fatal(err)
			}
			n, _, _, err := req.PromptTokens(tt.chat)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || n != tt.tokens {
				t.Fatalf("tokens = %d, %v; want %d", n, err, tt.tokens)
			}
		})
	}
}

func TestSessionKey(t *testing.T) {
	h := http.Header{}
	lead := "system:x\nuser:y\n"
	byLead := SessionKey(h, "", lead)
	byUser := SessionKey(h, "alice", lead)
	h.Set("X-Session-ID", "alice")
	byHeader := SessionKey(h, "alice", lead)
	if byLead == byUser || byUser == byHeader || byLead == byHeader {
		t.Fatalf("keys from different sources collide: %x %x %x", byLead, byUser, byHeader)
	}
	if SessionKey(http.Header{}, "", lead) != byLead {
		t.Fatal("session key is not deterministic")
	}
	// A growing conversation keeps its key: the lead is its first two messages.
	var short, long Request
	_ = json.Unmarshal([]byte(`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u1"}]}`), &short)
	_ = json.Unmarshal([]byte(`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u1"},{"role":"assistant","content":"a"},{"role":"user","content":"u2"}]}`), &long)
	_, l1, _, _ := short.PromptTokens(true)
	_, l2, _, _ := long.PromptTokens(true)
	if l1 != l2 {
		t.Fatalf("leads differ: %q vs %q", l1, l2)
	}
}

func FuzzPromptTokens(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`), true)
	f.Add([]byte(`{"prompt":["x"]}`), false)
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		var req Request
		if json.Unmarshal(body, &req) != nil {
			return
		}
		n, _, _, err := req.PromptTokens(chat)
		if err == nil && n < 1 {
			t.Fatalf("accepted a prompt of %d tokens", n)
		}
	})
}

func TestTextPlainAndEscaped(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`"hello"`, "hello"},
		{`""`, ""},
		{`"h\u00e9llo \"q\" \\ \n"`, "héllo \"q\" \\ \n"},
		{`"héllo"`, "héllo"},
		{"\"bad \xff byte\"", "bad \uFFFD byte"},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "ab"},
		{`null`, ""},
	} {
		got, err := Text(json.RawMessage(tt.raw))
		if err != nil || got != tt.want {
			t.Errorf("Text(%s) = %q, %v; want %q", tt.raw, got, err, tt.want)
		}
	}
}

// The plain-string path must read exactly what the JSON decoder reads.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"\u0041"`, "\"\x01\"", "\"\xff\"", `"`, `""`, `"a"b"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := plainString(raw)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("plainString accepted %q, which is not a JSON string: %v", raw, err)
		}
		if got != want {
			t.Fatalf("plainString(%q) = %q, the decoder reads %q", raw, got, want)
		}
	})
}

func TestContextLimit(t *testing.T) {
	for body, want := range map[string]int{
		`{"error":{"message":"This model's maximum context length is 16384 tokens. However, you requested 20000 tokens (19000 in the messages, 1000 in the completion)."}}`: 16384,
		`maximum context length is `:           -1,
		`{"error":{"message":"rate limited"}}`: -1,
		``:                                     -1,
		`{"error":{"message":"This model's maximum context length is 99999999999999999999 tokens. However, your request has 9 input tokens."}}`:                  -1,
		`{"error":{"message":"Input should be a valid number: \"This model's maximum context length is 8 tokens. However, your request has 9 input tokens.\""}}`: -1,
	} {
		if got := ContextLimit([]byte(body)); got != want {
			t.Errorf("ContextLimit(%q) = %d, want %d", body, got, want)
		}
	}
}
