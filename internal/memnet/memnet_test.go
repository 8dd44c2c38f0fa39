package memnet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHTTPOverMemnet(t *testing.T) {
	n := New()
	ln, err := n.Listen("gateway.local:80")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.Host+" "+strings.ToUpper(string(b)))
	})}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	tr := &http.Transport{DialContext: n.Dial(nil)}
	defer tr.CloseIdleConnections()
	for i := range 3 { // the second and third reuse the kept-alive pipe
		resp, err := (&http.Client{Transport: tr}).Post("http://gateway.local:80/x", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if got := string(b); got != "gateway.local:80 HELLO" {
			t.Fatalf("request %d: body %q", i, got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr.CloseIdleConnections()
	if err := hs.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}

func TestOtherAddressesGoToNext(t *testing.T) {
	n := New()
	ln, err := n.Listen("a.local:1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	var asked []string
	sentinel := errors.New("next dialer")
	dial := n.Dial(func(_ context.Context, network, addr string) (net.Conn, error) {
		asked = append(asked, network+" "+addr)
		return nil, sentinel
	})
	if _, err := dial(context.Background(), "tcp", "b.local:1"); !errors.Is(err, sentinel) {
		t.Fatalf("dial b.local:1: %v, want the next dialer's error", err)
	}
	if len(asked) != 1 || asked[0] != "tcp b.local:1" {
		t.Fatalf("next dialer asked %q", asked)
	}
}

func TestClosedListenerRefuses(t *testing.T) {
	n := New()
	ln, err := n.Listen("a.local:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("a.local:1"); err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("second Listen: %v, want already in use", err)
	}
	_ = ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
	dial := n.Dial(func(context.Context, string, string) (net.Conn, error) {
		t.Fatal("a closed in-process address must not go to the next dialer")
		return nil, nil
	})
	_, err = dial(context.Background(), "tcp", "a.local:1")
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after Close: %v, want a refused dial", err)
	}
	again, err := n.Listen("a.local:1")
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	_ = again.Close()
}

func TestDialEndsWithItsContext(t *testing.T) {
	n := New()
	ln, err := n.Listen("a.local:1") // nobody accepts
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = n.Dial(nil)(ctx, "tcp", "a.local:1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial: %v, want the context's deadline", err)
	}
}

func TestListenWantsHostPort(t *testing.T) {
	if _, err := New().Listen("no-port"); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("Listen(no-port): %v", err)
	}
}
