package httplimit_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stargate-llm/stargate/serve/httplimit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hangGuard bounds every wait: a test that reaches it failed, it never
// measures anything.
const hangGuard = 20 * time.Second

// start serves h under l on loopback until the test ends.
func start(t *testing.T, l httplimit.Limits, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- httplimit.Serve(ctx, ln, h, httplimit.Options{Limits: l, Name: "test", ShutdownGrace: time.Second})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// short are limits small enough for a test to reach.
func short() httplimit.Limits {
	l := httplimit.DefaultLimits()
	l.IdleTimeout, l.BodyReadTimeout, l.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	return l
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, hangGuard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(hangGuard))
	return c
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })

func TestIdleKeepAliveConnectionIsClosed(t *testing.T) {
	addr := start(t, short(), ok)
	c := dial(t, addr)
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	// Kept alive, then idle: the server closes it (EOF), long before the
	// hang guard's deadline.
	_, err = br.ReadByte()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %v; want EOF (closed by the server)", err)
	}
}

func TestSlowBodyIsCutOff(t *testing.T) {
	got := make(chan error, 1)
	addr := start(t, short(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		got <- err
	}))
	c := dial(t, addr)
	// Ten bytes of a hundred, then nothing.
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("the handler read the whole body of a client that sent a tenth of it")
		}
	case <-time.After(hangGuard):
		t.Fatal("a body that stopped arriving was never cut off")
	}
}

func TestTrickleReaderLosesItsSlot(t *testing.T) {
	got := make(chan error, 1)
	chunk := []byte(strings.Repeat("x", 64<<10))
	addr := start(t, short(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		for range 100_000 { // 6 GB: more than any socket buffers
			if _, err := w.Write(chunk); err != nil {
				got <- err
				return
			}
			f.Flush()
		}
		got <- nil
	}))
	c := dial(t, addr)
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads 16 bytes now and then: a trickle.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		buf := make([]byte, 16)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("the handler wrote 6 GB to a client reading 16 bytes at a time")
		}
	case <-time.After(hangGuard):
		t.Fatal("a client reading at a trickle held its request")
	}
}

func TestLongStreamIsNotCut(t *testing.T) {
	l := short()
	addr := start(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			t.Error(err)
			return
		}
		// Longer in all than every timeout, each write prompt.
		for i := range 5 {
			time.Sleep(l.WriteTimeout / 2)
			if i == 2 {
				time.Sleep(l.BodyReadTimeout)
			}
			_, _ = fmt.Fprintf(w, "event %d\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("a body"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || strings.Count(string(b), "event") != 5 {
		t.Fatalf("stream: %q, %v; want five events", b, err)
	}
}

func TestConnectionsBeyondTheLimitWait(t *testing.T) {
	l := short()
	l.MaxConns, l.IdleTimeout = 2, hangGuard
	addr := start(t, l, ok)
	held := []net.Conn{dial(t, addr), dial(t, addr)}
	for _, c := range held { // both accepted and served
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	third := dial(t, addr)
	if _, err := io.WriteString(third, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(third)
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := br.Peek(1); err == nil {
		t.Fatal("a third connection was served while two were open and the limit is 2")
	}
	_ = third.SetReadDeadline(time.Now().Add(hangGuard))
	_ = held[0].Close()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the waiting connection after one closed: %v", err)
	}
	_ = resp.Body.Close()
}

func TestLargeBodiesAreBounded(t *testing.T) {
	l := short()
	l.LargeBody, l.MaxLargeBodies, l.BodyReadTimeout = 10, 1, hangGuard
	entered, release := make(chan struct{}), make(chan struct{})
	addr := start(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if r.URL.Path == "/hold" {
			close(entered)
			<-release
		}
	}))
	body := strings.Repeat("b", 100)
	done := make(chan error, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/hold", "text/plain", strings.NewReader(body))
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	<-entered
	post := func(b string) int {
		t.Helper()
		resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(body); code != http.StatusServiceUnavailable {
		t.Errorf("a second large body while one is served: %d, want 503", code)
	}
	if code := post("small"); code != http.StatusOK {
		t.Errorf("a small body meanwhile: %d, want 200", code)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code := post(body); code != http.StatusOK {
		t.Errorf("a large body after the first ended: %d, want 200", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestHijackedConnectionKeepsNoDeadline(t *testing.T) {
	l := short()
	addr := start(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = nc.Close() }()
		time.Sleep(2 * l.WriteTimeout)
		_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		if err := rw.Flush(); err != nil {
			t.Errorf("writing on the hijacked connection after the write timeout: %v", err)
		}
	}))
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

func TestValidate(t *testing.T) {
	if err := httplimit.DefaultLimits().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	l := httplimit.DefaultLimits()
	l.WriteTimeout, l.MaxConns = 0, 0
	err := l.Validate()
	if err == nil || !strings.Contains(err.Error(), "--write-timeout") || !strings.Contains(err.Error(), "--max-connections") {
		t.Fatalf("zero write timeout and connections: %v; want both named", err)
	}
}

// deadlineRecorder is a ResponseWriter that counts the write deadlines set
// on it (http.ResponseController finds SetWriteDeadline).
type deadlineRecorder struct {
	http.ResponseWriter
	set int
}

func (d *deadlineRecorder) SetWriteDeadline(time.Time) error { d.set++; return nil }

// TestNoDeadlineOnAGoneRequest: after the handler returns, the write
// deadline is renewed for what the server still writes, but not on a
// request already gone (an HTTP/2 stream reset), whose timer would keep
// the stream alive until it fired.
func TestNoDeadlineOnAGoneRequest(t *testing.T) {
	for _, gone := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/", nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := &deadlineRecorder{}
		h := httplimit.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			if gone {
				cancel()
			}
		}), httplimit.DefaultLimits())
		h.ServeHTTP(rec, req)
		cancel()
		if want := map[bool]int{false: 1, true: 0}[gone]; rec.set != want {
			t.Errorf("request gone %v: %d write deadlines set after the handler, want %d", gone, rec.set, want)
		}
	}
}

// TestStalledBodiesHoldNoSlot: a body that may be large (a declared length
// above LargeBody, or no length) takes its slot only once more than
// LargeBody bytes of it have arrived. Clients that start such bodies and
// stall keep no one else's large body out; one that sends more than
// LargeBody and stalls holds its slot, and refusals then come as 503 with
// Retry-After (a declared length before its body, one of unknown length
// when it passes LargeBody); the slot comes back when that client leaves.
func TestStalledBodiesHoldNoSlot(t *testing.T) {
	l := short()
	l.LargeBody, l.MaxLargeBodies, l.BodyReadTimeout = 10, 1, hangGuard
	entered, large := make(chan struct{}, 8), make(chan struct{}, 1)
	addr := start(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stall" {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
			}
			return
		}
		entered <- struct{}{}
		var n int
		buf := make([]byte, 64)
		for {
			k, err := r.Body.Read(buf)
			if n <= int(l.LargeBody) && n+k > int(l.LargeBody) {
				large <- struct{}{}
			}
			n += k
			if err != nil {
				return
			}
		}
	}))
	defer http.DefaultClient.CloseIdleConnections()
	stall := func(request string) net.Conn {
		t.Helper()
		c := dial(t, addr)
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		answered := make(chan string, 1)
		go func() { // ends when the test closes c
			line, _ := bufio.NewReader(c).ReadString('\n')
			answered <- line
		}()
		select {
		case <-entered:
		case line := <-answered:
			t.Fatalf("a request that stalled in its body was answered %q instead of reaching its handler", strings.TrimSpace(line))
		case <-time.After(hangGuard):
			t.Fatal("a stalled request never reached its handler")
		}
		return c
	}
	// Three bodies of unknown length and two declared large, each stopped
	// within its first LargeBody bytes.
	for range 3 {
		stall("POST /stall HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	}
	for range 2 {
		stall("POST /stall HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nhello")
	}
	body := []byte(strings.Repeat("b", 100))
	for _, chunked := range []bool{false, true} {
		if code := send(t, addr, "/", body, chunked).code; code != http.StatusOK {
			t.Errorf("a large body (chunked %v) beside five stalled ones: %d, want 200", chunked, code)
		}
	}

	// One that sends more than LargeBody and stalls holds the slot.
	holder := stall("POST /stall HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n14\r\n01234567890123456789\r\n")
	select {
	case <-large:
	case <-time.After(hangGuard):
		t.Fatal("the holder's bytes never reached its handler")
	}
	for _, chunked := range []bool{false, true} {
		got := send(t, addr, "/", body, chunked)
		if got.code != http.StatusServiceUnavailable || got.header.Get("Retry-After") == "" {
			t.Errorf("a large body (chunked %v) while the slot is held: %d, Retry-After %q; want 503 with it",
				chunked, got.code, got.header.Get("Retry-After"))
		}
	}
	if code := send(t, addr, "/", []byte("small"), false).code; code != http.StatusOK {
		t.Errorf("a small body while the slot is held: %d, want 200", code)
	}

	// The holder leaves: its slot comes back once its handler has ended.
	_ = holder.Close()
	deadline := time.Now().Add(hangGuard)
	for send(t, addr, "/", body, false).code != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the slot of a client that left never came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
