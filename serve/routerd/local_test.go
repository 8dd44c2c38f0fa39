package routerd

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/openai"
)

const streamBody = `{"stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`

// TestLocalStreamsAsWritten checks that what the in-process gateway flushes
// reaches the client before the gateway writes more, with its headers, and
// that the request is accounted as completed.
func TestLocalStreamsAsWritten(t *testing.T) {
	release := make(chan struct{})
	gw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		if r.RemoteAddr != "" {
			t.Errorf("a completion came over the network from %s", r.RemoteAddr)
		}
		// "hi" is 1 token, and its message 4 more (package openai).
		if rd, ok := openai.ReadFrom(r.Context()); !ok || rd.Prompt != 5 || rd.Session == 0 {
			t.Errorf("the router's reading of the request: %+v, %v; want 5 prompt tokens and a session", rd, ok)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Internal", "not for clients")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "data: second\n\ndata: [DONE]\n\n")
	})
	url, srv := startRouterWith(t, nil, gw)
	// The first line must come while the gateway waits: if it did not, the
	// client's timeout ends the test.
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("X-Stargate-Backend") != "a" || resp.Header.Get("X-Internal") != "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: first\n" {
		close(release)
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: second\n\ndata: [DONE]\n\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	poll.Until(t, 5*time.Second, "the request is counted", func() bool { c := srv.Counts(); return c.Ended() == 1 })
	if c := srv.Counts(); c.Completed != 1 {
		t.Errorf("counts %+v, want one completed", c)
	}
}

// TestLocalRefusals checks that a refusal another backend may take never
// reaches the client, and that one it may not passes through whole.
func TestLocalRefusals(t *testing.T) {
	for _, tt := range []struct {
		name    string
		status  int
		body    string
		backend string // who answers the client
	}{
		{"overloaded", http.StatusServiceUnavailable, `{"error":{"message":"busy"}}`, "b"},
		{"rate limited", http.StatusTooManyRequests, `{"error":{"message":"slow down"}}`, "b"},
		{"context too long", http.StatusBadRequest, `{"error":{"message":"This model's maximum context length is 2 tokens. However, your request has 9 input tokens."}}`, "b"},
		{"bad request", http.StatusBadRequest, `{"error":{"message":"temperature must be positive"}}`, "a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/health" {
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			url, srv := startRouterWith(t, nil, gw, &echoBackend{})
			for range 2 { // round-robin: the second starts at b
				resp, body := call(t, url, okBody, nil)
				if got := resp.Header.Get("X-Stargate-Backend"); got != tt.backend && got != "b" {
					t.Fatalf("answered by %q: %d %s", got, resp.StatusCode, body)
				}
				if resp.Header.Get("X-Stargate-Backend") == "a" && (resp.StatusCode != tt.status || body != tt.body) {
					t.Errorf("a's answer came through as %d %q, want %d %q", resp.StatusCode, body, tt.status, tt.body)
				}
				if resp.Header.Get("X-Stargate-Backend") == "b" && (resp.StatusCode != 200 || resp.Header.Get("Retry-After") != "") {
					t.Errorf("b's answer came with a's refusal: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
				}
			}
			if c := srv.Counts(); c.Ended() != 2 {
				t.Errorf("counts %+v, want 2 ended", c)
			}
		})
	}
}

// TestLocalPanicFailsOneRequest checks that a panic in the in-process
// gateway fails its request, before or after the first byte, and nothing
// else.
func TestLocalPanicFailsOneRequest(t *testing.T) {
	var calls atomic.Int32
	gw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		switch calls.Add(1) {
		case 1:
			panic("before the first byte")
		case 2:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			panic("mid-stream")
		}
		_, _ = io.WriteString(w, `{"choices":[]}`)
	})
	url, srv := startRouterWith(t, nil, gw)
	resp, body := call(t, url, okBody, nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "in-process gateway panicked") {
		t.Errorf("panic before the first byte: %d %s", resp.StatusCode, body)
	}
	resp, body = call(t, url, streamBody, nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "data: first\n\n") || !strings.Contains(body, `"error"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("panic mid-stream: %d %q", resp.StatusCode, body)
	}
	if resp, body = call(t, url, okBody, nil); resp.StatusCode != 200 {
		t.Errorf("after the panics: %d %s", resp.StatusCode, body)
	}
	if c := srv.Counts(); c.Failed[ReasonBackendLost] != 2 || c.Completed != 1 {
		t.Errorf("counts %+v, want 2 %s and 1 completed", c, ReasonBackendLost)
	}
}

// TestLocalClosedRefuses checks that a closed in-process gateway refuses
// like a closed port, so requests go to the other backend.
func TestLocalClosedRefuses(t *testing.T) {
	a, b := &echoBackend{}, &echoBackend{}
	var local *Local
	url, _ := startRouterWith(t, func(c *Config) { local = c.Local }, a, b)
	if err := local.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if resp, body := call(t, url, okBody, nil); resp.StatusCode != 200 || resp.Header.Get("X-Stargate-Backend") != "b" {
			t.Fatalf("%d from %q: %s", resp.StatusCode, resp.Header.Get("X-Stargate-Backend"), body)
		}
	}
	if n, _ := a.seen(); n != 0 {
		t.Errorf("the closed gateway got %d requests", n)
	}
}

// TestLocalCloseWaitsForRequests checks that Close returns only when the
// requests in the gateway have ended, or when its context ends.
func TestLocalCloseWaitsForRequests(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	gw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		close(entered)
		<-release
		_, _ = io.WriteString(w, `{"choices":[]}`)
	})
	var local *Local
	url, _ := startRouterWith(t, func(c *Config) { local = c.Local }, gw)
	status := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(okBody))
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	<-entered
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := local.Close(short); err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Errorf("Close with a request in flight: %v", err)
	}
	close(release)
	if err := local.Close(context.Background()); err != nil {
		t.Errorf("Close once the request ended: %v", err)
	}
	if s := <-status; s != 200 {
		t.Errorf("the request in flight ended %d", s)
	}
}

// TestLocalClientGoesAway checks that a client leaving mid-stream ends the
// gateway's request and is counted as cancelled.
func TestLocalClientGoesAway(t *testing.T) {
	gone := make(chan struct{})
	gw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	})
	url, srv := startRouterWith(t, nil, gw)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(streamBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	resp.Body.Close()
	<-gone
	poll.Until(t, 5*time.Second, "the request is counted", func() bool { c := srv.Counts(); return c.Ended() == 1 })
	if c := srv.Counts(); c.Failed[ReasonClientCancelled] != 1 {
		t.Errorf("counts %+v, want one %s", c, ReasonClientCancelled)
	}
}

// TestLocalPathFaultGoesOverTheNetwork checks that an operator's path fault
// on the in-process gateway still applies: those requests take the network.
func TestLocalPathFaultGoesOverTheNetwork(t *testing.T) {
	a := &echoBackend{}
	url, srv := startRouterWith(t, nil, a)
	call(t, url, okBody, nil)
	if err := srv.SetPath("a", 2*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	call(t, url, okBody, nil)
	if err := srv.SetPath("a", 0, 0); err != nil {
		t.Fatal(err)
	}
	call(t, url, okBody, nil)
	if n, direct := a.seen(); n != 3 || direct != 2 {
		t.Errorf("%d requests, %d in process; want 3, the one with a path fault over the network", n, direct)
	}
}

func TestLocalOpenRefusesBadURL(t *testing.T) {
	for _, u := range []string{"", "gw:80", "ftp://gw", "http://"} {
		if err := (&Local{}).Open(u, http.NotFoundHandler()); err == nil {
			t.Errorf("Open(%q) accepted", u)
		}
	}
	cfg := DefaultConfig()
	cfg.Static = []StaticBackend{{Name: "a", URL: "http://a", Capacity: 1}}
	cfg.Local, cfg.Network = &Local{}, func(rt http.RoundTripper) http.RoundTripper { return rt }
	if err := cfg.Validate(policy.NewRegistry()); err == nil || !strings.Contains(err.Error(), "in-process network") {
		t.Errorf("Local with Network: %v", err)
	}
}

// TestLocalURLAsRegistered: the router keeps backend URLs without a
// trailing slash, and matches the in-process gateway's URL the same way.
func TestLocalURLAsRegistered(t *testing.T) {
	a := &echoBackend{}
	var local *Local
	var static string
	url, _ := startRouterWith(t, func(c *Config) { local, static = c.Local, c.Static[0].URL }, a)
	if err := local.Open(static+"/", a); err != nil {
		t.Fatal(err)
	}
	call(t, url, okBody, nil)
	if n, direct := a.seen(); n != 1 || direct != 1 {
		t.Errorf("%d requests, %d in process; want the one in process", n, direct)
	}
}
