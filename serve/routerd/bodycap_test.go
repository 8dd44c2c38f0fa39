package routerd

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTooManyMessagesRefusedWhileReading: a body whose messages array passes
// the cap is refused as soon as the router has read that far, though the
// rest of the body never comes.
func TestTooManyMessagesRefusedWhileReading(t *testing.T) {
	url := startRouter(t, func(c *Config) { c.MaxMessages = 3 }, &echoBackend{})
	pr, pw := io.Pipe()
	defer func() { _ = pw.Close() }()
	go func() {
		// Ten messages, then the body stalls: it is never finished.
		_, _ = io.WriteString(pw, `{"messages":[`+strings.Repeat(`{"role":"user","content":"x"},`, 10))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // hang guard
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer before the body ended: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "more than 3 messages") {
		t.Fatalf("status %d, body %s; want 400 naming the cap", resp.StatusCode, b)
	}
}
