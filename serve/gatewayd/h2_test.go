package gatewayd

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/httplimit"
)

// h2cClient speaks HTTP/2 without TLS (prior knowledge), as routers do.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

func postWith(ctx context.Context, c *http.Client, url, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

var contentRE = regexp.MustCompile(`"content":"([^"]*)"`)

// contentWords counts the words of an SSE answer's content (the engine may
// put several tokens in one event).
func contentWords(body []byte) int {
	n := 0
	for _, m := range contentRE.FindAllSubmatch(body, -1) {
		n += len(strings.Fields(string(m[1])))
	}
	return n
}

// TestH2C: the gateway's port serves HTTP/2 without TLS and HTTP/1.1 side
// by side, the same answers both ways.
func TestH2C(t *testing.T) {
	eng := startEngine(t, "127.0.0.1:0", testKey)
	_, url := startGateway(t, "http://"+eng.addr, nil)
	h2 := h2cClient()
	defer h2.CloseIdleConnections()
	for _, tc := range []struct {
		name      string
		client    *http.Client
		wantMajor int
	}{{"h2c", h2, 2}, {"http/1.1", http.DefaultClient, 1}} {
		resp, err := postWith(context.Background(), tc.client, url, `{"stream":true,"max_tokens":7,"messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || resp.ProtoMajor != tc.wantMajor {
			t.Fatalf("%s: %s over %s, %v; want 200 over HTTP/%d", tc.name, resp.Status, resp.Proto, err, tc.wantMajor)
		}
		if n := contentWords(body); n != 7 || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
			t.Errorf("%s: %d words in %q; want 7 tokens and [DONE]", tc.name, n, tail(string(body)))
		}
	}
}

// TestH2CCloseRouterConns: closing the routers' connections, as a crash
// would, fails the streams on them; the gateway's engine leg is unaffected
// and a new connection is served.
func TestH2CCloseRouterConns(t *testing.T) {
	eng := startEngine(t, "127.0.0.1:0", auth.Key{})
	g, url := startGateway(t, "http://"+eng.addr, nil)
	h2 := h2cClient()
	defer h2.CloseIdleConnections()
	resp, err := postWith(context.Background(), h2, url, `{"stream":true,"max_tokens":5000,"messages":[{"role":"user","content":"long answer"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	g.CloseRouterConns()
	rest, err := io.ReadAll(rd)
	resp.Body.Close()
	if err == nil || strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("stream after the close: %v, ends %q; want a read error before [DONE]", err, tail(string(rest)))
	}
}

// TestH2CShutdownDrains: when the gateway stops, a stream in flight on an
// HTTP/2 connection runs to its end (GOAWAY lets it finish) and a new
// connection is refused.
func TestH2CShutdownDrains(t *testing.T) {
	eng := startEngine(t, "127.0.0.1:0", testKey)
	cfg := DefaultConfig()
	cfg.ID, cfg.Engines, cfg.Key, cfg.OpenDataPlane = "gw", []string{"http://" + eng.addr}, testKey, true
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: g.Handler()}
	go func() { _ = hs.Serve(ln) }()
	defer func() { _ = hs.Close(); g.Wait() }()
	url := "http://" + ln.Addr().String()

	h2 := h2cClient()
	defer h2.CloseIdleConnections()
	resp, err := postWith(context.Background(), h2, url, `{"stream":true,"max_tokens":40,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	stop() // the gateway drains its HTTP/2 connections
	rest, err := io.ReadAll(rd)
	resp.Body.Close()
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("stream in flight at shutdown: %v, ends %q; want it whole", err, tail(string(rest)))
	}
	// A new connection is turned away (the HTTP/1.1 server answers it).
	fresh := h2cClient()
	defer fresh.CloseIdleConnections()
	hang, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err = postWith(hang, fresh, url, `{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("a new HTTP/2 connection after shutdown got %s; want it refused", resp.Status)
		}
		time.Sleep(20 * time.Millisecond) // Shutdown runs when Start's loops see ctx end
	}
}

// TestH2CUnderTheListenersLimits: streams over h2c are served under the
// limits of the listener that took their connection over, as HTTP/1.1
// requests are: a body over the listener's memory budget is refused (413)
// both ways, and one within it is served both ways.
func TestH2CUnderTheListenersLimits(t *testing.T) {
	eng := startEngine(t, "127.0.0.1:0", testKey)
	g, cancel := newStartedGateway(t, "http://"+eng.addr, nil)
	ctx, stop := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := httplimit.DefaultLimits()
	lim.LargeBody, lim.MaxBodyMemory = 1<<10, 1<<20 // a body over 256 KiB costs more than the budget
	served := make(chan error, 1)
	go func() {
		served <- httplimit.Serve(ctx, ln, g.Handler(), httplimit.Options{Limits: lim, Name: "gateway", ShutdownGrace: time.Second})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Error(err)
		}
		cancel()
		g.Wait()
	})
	url := "http://" + ln.Addr().String()
	h2 := h2cClient()
	defer h2.CloseIdleConnections()
	small := `{"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`
	big := `{"max_tokens":3,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 100_000) + `"}]}`
	for _, tc := range []struct {
		name      string
		client    *http.Client
		wantMajor int
	}{{"h2c", h2, 2}, {"http/1.1", http.DefaultClient, 1}} {
		for _, c := range []struct {
			body string
			want int
		}{{small, http.StatusOK}, {big, http.StatusRequestEntityTooLarge}} {
			resp, err := postWith(context.Background(), tc.client, url, c.body)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want || resp.ProtoMajor != tc.wantMajor {
				t.Errorf("%s, a %d-byte body: %s over %s; want %d over HTTP/%d", tc.name, len(c.body), resp.Status, resp.Proto, c.want, tc.wantMajor)
			}
		}
	}
}
