package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stargate-llm/stargate/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// engine is a TCP server that reads each request with net/http's parser
// and answers it with raw bytes from answer, which says whether to keep
// the connection for the next request.
type engine struct {
	target   Target
	accepts  atomic.Int32
	closed   atomic.Int32 // connections the engine has closed
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
}

func startEngine(t *testing.T, answer func(w net.Conn, n int) (keep bool)) *engine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{}
	if e.target, err = ParseTarget("http://" + ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns sync.Map
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepts.Add(1)
			conns.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = c.Close(); e.closed.Add(1) }()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, _ := io.ReadAll(req.Body)
					e.mu.Lock()
					e.requests = append(e.requests, req)
					e.bodies = append(e.bodies, string(body))
					n := len(e.requests)
					e.mu.Unlock()
					if !answer(c, n) {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Range(func(c, _ any) bool { _ = c.(net.Conn).Close(); return true })
		wg.Wait()
	})
	return e
}

// seen is how many requests the engine has read.
func (e *engine) seen() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.requests)
}

// writeAll sends each piece in its own write, a little apart, so the
// client sees them in separate reads.
func writeAll(w net.Conn, pieces ...string) {
	for i, p := range pieces {
		if i > 0 {
			time.Sleep(2 * time.Millisecond)
		}
		if _, err := io.WriteString(w, p); err != nil {
			return
		}
	}
}

// fetch runs one Do and collects what it got.
func fetch(ctx context.Context, cl *Client, tg Target, req *Request) (status int, body string, reads int, err error) {
	var b strings.Builder
	err = cl.Do(ctx, tg, req, func(r *Response) error { status = r.StatusCode; return nil },
		func(p []byte) error { reads++; b.Write(p); return nil })
	return status, b.String(), reads, err
}

func post(body string) *Request {
	return &Request{Method: http.MethodPost, Path: "/v1/chat/completions", Body: []byte(body),
		Header: http.Header{"Content-Type": {"application/json"}, "X-Session-Id": {"s1"}}}
}

func TestAnswers(t *testing.T) {
	const sse = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, tt := range []struct {
		name    string
		pieces  []string
		status  int
		body    string
		wantErr string // a part of the error; "" for none
	}{
		{"content length", []string{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"}, 200, "hello", ""},
		{"content length in pieces", []string{"HTTP/1.1 200 OK\r\nContent-", "Length: 11\r\n\r\nhello", " world"}, 200, "hello world", ""},
		{"chunked, one write", []string{sse + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"}, 200, "hello world", ""},
		{"chunked, events apart", []string{sse, chunk("data: {\"a\":1}\n\n"), chunk("data: {\"a\":2}\n\n"), chunk("data: [DONE]\n\n") + "0\r\n\r\n"},
			200, "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", ""},
		{"chunked, split everywhere", []string{sse + "5", "\r", "\nhel", "lo\r", "\n0;ext=1\r\n", "Trailer-A: x\r\n", "\r\n"}, 200, "hello", ""},
		{"chunked, bare line feeds", []string{"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n"}, 200, "abc", ""},
		{"chunk extension and hex case", []string{sse + "A;name=v\r\n0123456789\r\n0\r\n\r\n"}, 200, "0123456789", ""},
		{"interim answer skipped", []string{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}, 200, "ok", ""},
		{"no content", []string{"HTTP/1.1 204 No Content\r\n\r\n"}, 204, "", ""},
		{"refusal with a body", []string{"HTTP/1.1 400 Bad Request\r\nContent-Length: 7\r\n\r\n{\"e\":1}"}, 400, `{"e":1}`, ""},
		{"until close", []string{"HTTP/1.1 200 OK\r\n\r\nall of it"}, 200, "all of it", ""},
		{"http/1.0", []string{"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"}, 200, "ok", ""},

		{"not http", []string{"SSH-2.0-OpenSSH\r\n\r\n"}, 0, "", "want HTTP/1.x"},
		{"bad status", []string{"HTTP/1.1 2x0 OK\r\n\r\n"}, 0, "", "bad status code"},
		{"switching protocols", []string{"HTTP/1.1 101 Switching Protocols\r\n\r\n"}, 0, "", "switched protocols"},
		{"folded field", []string{"HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n"}, 0, "", "folded"},
		{"field without colon", []string{"HTTP/1.1 200 OK\r\nnonsense\r\n\r\n"}, 0, "", "malformed header line"},
		{"space before colon", []string{"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok"}, 0, "", "malformed header line"},
		{"gzip coding", []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"}, 0, "", "decodes chunked only"},
		{"two lengths", []string{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"}, 0, "", "differing Content-Length"},
		{"bad length", []string{"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"}, 0, "", "bad Content-Length"},
		{"bad chunk size", []string{sse + "zz\r\n"}, 200, "", "bad chunk size line"},
		{"signed chunk size", []string{sse + "+a\r\n0123456789\r\n0\r\n\r\n"}, 200, "", "bad chunk size line"},
		{"space before chunk size", []string{sse + " a\r\n0123456789\r\n0\r\n\r\n"}, 200, "", "bad chunk size line"},
		{"space before extension", []string{sse + "a ;x=1\r\n0123456789\r\n0\r\n\r\n"}, 200, "0123456789", ""},
		{"chunk longer than said", []string{sse + "2\r\nabc\r\n0\r\n\r\n"}, 200, "ab", "longer than its size line"},
		{"head too large", []string{"HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", bufSize) + "\r\n\r\n"}, 0, "", "longer than 16384 bytes"},
		{"closed mid-body", []string{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf"}, 200, "half", "mid-answer"},
		{"closed mid-stream", []string{sse + "5\r\nhello\r\n"}, 200, "hello", "mid-answer"},
		{"closed before any answer", nil, 0, "", "EOF"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := startEngine(t, func(w net.Conn, _ int) bool { writeAll(w, tt.pieces...); return false })
			cl := &Client{IdleTimeout: 5 * time.Second}
			defer cl.Close()
			status, body, _, err := fetch(context.Background(), cl, e.target, post(`{"x":1}`))
			if status != tt.status || body != tt.body {
				t.Errorf("got status %d body %q, want %d %q", status, body, tt.status, tt.body)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tt.wantErr)
			}
			var ns *NotSentError
			if errors.As(err, &ns) {
				t.Errorf("error %v says not sent; the request was written", err)
			}
		})
	}
}

// TestRequestOnTheWire: what the engine receives, read by net/http's own
// request parser.
func TestRequestOnTheWire(t *testing.T) {
	e := startEngine(t, func(w net.Conn, _ int) bool {
		writeAll(w, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		return true
	})
	tg, err := ParseTarget("http://" + e.target.addr + "/prefix/")
	if err != nil {
		t.Fatal(err)
	}
	cl := &Client{}
	defer cl.Close()
	big := strings.Repeat("b", 100<<10) // over the size sent in one buffer with the head
	for _, body := range []string{`{"messages":[]}`, big} {
		if _, _, _, err := fetch(context.Background(), cl, tg, post(body)); err != nil {
			t.Fatal(err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, req := range e.requests {
		if req.Method != "POST" || req.URL.Path != "/prefix/v1/chat/completions" || req.Host != e.target.addr ||
			req.Header.Get("Content-Type") != "application/json" || req.Header.Get("X-Session-Id") != "s1" ||
			req.ContentLength != int64(len(e.bodies[i])) {
			t.Errorf("request %d: %s %s host %q fields %v length %d", i, req.Method, req.URL, req.Host, req.Header, req.ContentLength)
		}
	}
	if len(e.bodies) != 2 || e.bodies[0] != `{"messages":[]}` || e.bodies[1] != big {
		t.Errorf("bodies of lengths %d, want the two sent", len(e.bodies))
	}
	if n := e.accepts.Load(); n != 1 {
		t.Errorf("%d connections for two requests, want 1 kept alive", n)
	}
}

func TestFieldsThatCannotBeSent(t *testing.T) {
	e := startEngine(t, func(w net.Conn, _ int) bool { return false })
	cl := &Client{}
	defer cl.Close()
	for _, req := range []*Request{
		{Method: "POST", Path: "/", Header: http.Header{"X-A": {"v\r\nInjected: 1"}}},
		{Method: "POST", Path: "/", Header: http.Header{"Bad Name": {"v"}}},
		{Method: "POST", Path: "/", Header: http.Header{"": {"v"}}},
		{Method: "POST", Path: "/v1 HTTP/1.1\r\nX: y"},
		{Method: "POST", Path: "v1/chat"},
		{Method: "PO ST", Path: "/"},
	} {
		err := cl.Do(context.Background(), e.target, req, func(*Response) error { return nil }, func([]byte) error { return nil })
		var ns *NotSentError
		if !errors.As(err, &ns) {
			t.Errorf("%s %q %q: error %v, want a NotSentError", req.Method, req.Path, req.Header, err)
		}
	}
	if n := e.seen(); n != 0 {
		t.Errorf("the engine read %d requests, want none", n)
	}
}

// TestKeepAlive: a connection is reused after a whole answer, and not after
// an answer that asks to close it or one cut short.
func TestKeepAlive(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer string
		conns  int32
	}{
		{"kept", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 1},
		{"chunked kept", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 1},
		{"close asked", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 3},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 3},
		{"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", 1},
		{"both framings", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 3},
		{"http/1.0 chunked", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := startEngine(t, func(w net.Conn, _ int) bool { writeAll(w, tt.answer); return true })
			cl := &Client{}
			defer cl.Close()
			for i := range 3 {
				if _, body, _, err := fetch(context.Background(), cl, e.target, post("{}")); err != nil || body != "ok" {
					t.Fatalf("request %d: body %q, error %v", i, body, err)
				}
			}
			if n := e.accepts.Load(); n != tt.conns {
				t.Errorf("%d connections for 3 requests, want %d", n, tt.conns)
			}
		})
	}
}

// TestStaleConnectionRetried: the engine closed a kept connection while it
// sat idle; the next request goes once more on a new connection.
func TestStaleConnectionRetried(t *testing.T) {
	e := startEngine(t, func(w net.Conn, _ int) bool {
		writeAll(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return false // closes without saying so
	})
	cl := &Client{}
	defer cl.Close()
	for i := range 3 {
		// The engine's close must come before the next request (see
		// TestStaleConnectionsAllDropped).
		poll.Until(t, time.Second, "the engine to close", func() bool { return e.closed.Load() == int32(i) })
		if _, body, _, err := fetch(context.Background(), cl, e.target, post("{}")); err != nil || body != "ok" {
			t.Fatalf("request %d: body %q, error %v", i, body, err)
		}
	}
	if n := e.accepts.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
	if n := e.seen(); n != 3 {
		t.Errorf("engine saw %d requests, want 3 (a retry only after the engine closed)", n)
	}
}

// TestStaleConnectionsAllDropped: after an engine restart every kept
// connection is closed; the retry goes on a new connection, not on the
// next stale one.
func TestStaleConnectionsAllDropped(t *testing.T) {
	// The first two requests are answered only once both have arrived, so
	// they overlap and take two connections however the goroutines run.
	var arrived atomic.Int32
	both := make(chan struct{})
	e := startEngine(t, func(w net.Conn, _ int) bool {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(10 * time.Second): // a hang guard; the test then fails on the count
		}
		writeAll(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return false // closes without saying so
	})
	cl := &Client{}
	defer cl.Close()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, body, _, err := fetch(context.Background(), cl, e.target, post("{}")); err != nil || body != "ok" {
				t.Errorf("body %q, error %v", body, err)
			}
		})
	}
	wg.Wait()
	cl.mu.Lock()
	kept := len(cl.idle[e.target.addr])
	cl.mu.Unlock()
	if kept != 2 {
		t.Fatalf("%d connections kept, want 2", kept)
	}
	// A close that crosses the next request is a race no client wins: the
	// test is about closes that came before it.
	poll.Until(t, time.Second, "the engine to close both", func() bool { return e.closed.Load() == 2 })
	if _, body, _, err := fetch(context.Background(), cl, e.target, post("{}")); err != nil || body != "ok" {
		t.Fatalf("after the engine closed both: body %q, error %v", body, err)
	}
}

// TestWrittenRequestNotResent: a request written whole on a kept connection
// that the engine then drops is not sent again (the engine may be running
// it), and is not reported as unsent.
func TestWrittenRequestNotResent(t *testing.T) {
	e := startEngine(t, func(w net.Conn, n int) bool {
		if n == 2 {
			return false // read the second request, then die without answering
		}
		writeAll(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	cl := &Client{}
	defer cl.Close()
	if _, body, _, err := fetch(context.Background(), cl, e.target, post("{}")); err != nil || body != "ok" {
		t.Fatalf("first request: body %q, error %v", body, err)
	}
	_, _, _, err := fetch(context.Background(), cl, e.target, post("{}"))
	var ns *NotSentError
	if err == nil || errors.As(err, &ns) {
		t.Errorf("error %v, want a lost connection after the request was sent", err)
	}
	if n, a := e.seen(), e.accepts.Load(); n != 2 || a != 1 {
		t.Errorf("engine read %d requests on %d connections, want 2 on 1", n, a)
	}
}

// TestIdleConnectionThatSpoke: bytes an engine sends on a kept connection
// between requests are not read as the next answer; the connection is
// dropped for a new one.
func TestIdleConnectionThatSpoke(t *testing.T) {
	spoke := make(chan struct{})
	e := startEngine(t, func(w net.Conn, n int) bool {
		writeAll(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n%02d", n))
		if n == 1 { // after the client has kept the connection
			time.Sleep(10 * time.Millisecond)
			writeAll(w, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
			close(spoke)
		}
		return true
	})
	cl := &Client{}
	defer cl.Close()
	for i, want := range []string{"01", "02"} {
		if i == 1 {
			<-spoke // the stray answer was sent: wait until the kept connection shows it
			poll.Until(t, 5*time.Second, "the stray answer to reach the kept connection", func() bool {
				cl.mu.Lock()
				defer cl.mu.Unlock()
				kept := cl.idle[e.target.addr]
				return len(kept) == 1 && !kept[0].alive()
			})
		}
		if status, body, _, err := fetch(context.Background(), cl, e.target, post("{}")); err != nil || status != 200 || body != want {
			t.Fatalf("request %d: status %d body %q error %v, want 200 %q", i, status, body, err, want)
		}
	}
	if a := e.accepts.Load(); a != 2 {
		t.Errorf("%d connections, want 2: the one that spoke out of turn is dropped", a)
	}
}

// TestLostAfterSending: a new connection that closes after the request was
// read is not retried (the engine may have run it), and is not a
// NotSentError; an engine that is not there is.
func TestLostAfterSending(t *testing.T) {
	e := startEngine(t, func(w net.Conn, _ int) bool { return false })
	cl := &Client{}
	defer cl.Close()
	_, _, _, err := fetch(context.Background(), cl, e.target, post("{}"))
	var ns *NotSentError
	if err == nil || errors.As(err, &ns) || e.accepts.Load() != 1 {
		t.Errorf("error %v after %d connections, want a lost connection after one", err, e.accepts.Load())
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	gone, _ := ParseTarget("http://" + ln.Addr().String())
	_ = ln.Close()
	if _, _, _, err := fetch(context.Background(), cl, gone, post("{}")); !errors.As(err, &ns) {
		t.Errorf("unreachable engine: error %v, want a NotSentError", err)
	}
}

// TestIdleTimeout: the engine's silence ends the exchange; the body
// callback's own time does not count as silence.
func TestIdleTimeout(t *testing.T) {
	t.Run("silent engine", func(t *testing.T) {
		// The engine keeps the connection open and says nothing more until
		// the test ends, so the exchange can only end by the idle timeout
		// (or, if that failed to fire, by the context's guard). A 1 s
		// timeout, so that the bound below leaves a loaded machine a
		// second and still catches a deadline rounded up to a later look.
		const timeout = time.Second
		stop := make(chan struct{})
		e := startEngine(t, func(w net.Conn, _ int) bool {
			writeAll(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n")
			<-stop
			return false
		})
		defer close(stop)
		cl := &Client{IdleTimeout: timeout}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*timeout)
		defer cancel()
		start := time.Now()
		_, body, _, err := fetch(ctx, cl, e.target, post("{}"))
		if !errors.Is(err, ErrTimeout) || body != "ok" {
			t.Errorf("body %q, error %v; want ok, then ErrTimeout", body, err)
		}
		if d := time.Since(start); d < timeout || d > 2*timeout {
			t.Errorf("timed out after %v, want %v or a little more", d, timeout)
		}
	})
	t.Run("partial line", func(t *testing.T) {
		// Leftover bytes of a line cut short are looked at again at each
		// look (lookAgain); that is not the engine speaking.
		for name, sent := range map[string]string{
			"head":       "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n",
			"chunk line": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n1",
		} {
			t.Run(name, func(t *testing.T) {
				stop := make(chan struct{})
				e := startEngine(t, func(w net.Conn, _ int) bool { writeAll(w, sent); <-stop; return false })
				defer close(stop)
				cl := &Client{IdleTimeout: 2*lookAgain + lookAgain/2}
				defer cl.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*lookAgain)
				defer cancel()
				if _, _, _, err := fetch(ctx, cl, e.target, post("{}")); !errors.Is(err, ErrTimeout) {
					t.Errorf("error %v, want ErrTimeout", err)
				}
			})
		}
	})
	t.Run("slow callback", func(t *testing.T) {
		// A longer timeout here: the engine's second chunk comes 0.4 s
		// after the callback returns, 0.6 s before the timeout would end
		// the exchange, a margin a loaded machine's scheduling keeps.
		const timeout = time.Second
		e := startEngine(t, func(w net.Conn, _ int) bool {
			writeAll(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
			time.Sleep(3 * timeout / 2) // the callback takes 1.1 s; this comes 0.4 s after it returns
			writeAll(w, "1\r\nb\r\n0\r\n\r\n")
			return true
		})
		cl := &Client{IdleTimeout: timeout}
		defer cl.Close()
		var got strings.Builder
		err := cl.Do(context.Background(), e.target, post("{}"), func(*Response) error { return nil }, func(p []byte) error {
			if got.Len() == 0 {
				time.Sleep(timeout + timeout/10) // longer than the timeout: it must not count
			}
			got.Write(p)
			return nil
		})
		if err != nil || got.String() != "ab" {
			t.Errorf("body %q, error %v; want ab and no timeout", got.String(), err)
		}
	})
}

// TestCancel: cancelling the context ends a wait for the engine at once, with
// the context's cause, and the connection is not reused.
func TestCancel(t *testing.T) {
	release := make(chan struct{})
	e := startEngine(t, func(w net.Conn, n int) bool {
		writeAll(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n")
		if n == 1 {
			<-release
		}
		writeAll(w, "0\r\n\r\n")
		return true
	})
	defer close(release)
	cl := &Client{}
	defer cl.Close()
	why := errors.New("the client went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(why) })
	start := time.Now()
	_, body, _, err := fetch(ctx, cl, e.target, post("{}"))
	if !errors.Is(err, why) || body != "ok" || time.Since(start) > 2*time.Second {
		t.Fatalf("body %q, error %v after %v; want ok, then the cause", body, err, time.Since(start))
	}
	if _, body, _, err := fetch(context.Background(), cl, e.target, post("{}")); err != nil || body != "ok" {
		t.Fatalf("after a cancel: body %q, error %v", body, err)
	}
	if n := e.accepts.Load(); n != 2 {
		t.Errorf("%d connections, want 2: a cancelled exchange's connection is not reused", n)
	}
}

// TestCallbackError: an error from a callback comes back unchanged and the
// connection closes.
func TestCallbackError(t *testing.T) {
	e := startEngine(t, func(w net.Conn, _ int) bool {
		writeAll(w, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab", "cd")
		return true
	})
	cl := &Client{}
	defer cl.Close()
	stop := errors.New("stop")
	for _, tt := range []struct {
		name       string
		head, body error
	}{{"head", stop, nil}, {"body", nil, stop}} {
		err := cl.Do(context.Background(), e.target, post("{}"),
			func(*Response) error { return tt.head }, func([]byte) error { return tt.body })
		if !errors.Is(err, stop) || err.Error() != stop.Error() {
			t.Errorf("%s: error %v, want the callback's own", tt.name, err)
		}
	}
	if n := e.accepts.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestNoWakeUpLost streams many small chunks with irregular gaps, some
// written together and some apart. A read that waits after a short read must
// still see every byte: a lost wake-up would stall the stream until the read
// timeout.
func TestNoWakeUpLost(t *testing.T) {
	const events = 400
	defer func(d time.Duration) { lookAgain = d }(lookAgain)
	lookAgain = time.Hour // no look may rescue a lost wake-up
	e := startEngine(t, func(w net.Conn, n int) bool {
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		bw := bufio.NewWriter(w)
		fmt.Fprint(bw, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i := range events {
			ev := fmt.Sprintf("data: %d\n\n", i)
			fmt.Fprintf(bw, "%x\r\n%s\r\n", len(ev), ev)
			if rng.IntN(3) > 0 {
				_ = bw.Flush()
				if d := rng.IntN(4); d > 0 {
					time.Sleep(time.Duration(d*50) * time.Microsecond)
				}
			}
		}
		fmt.Fprint(bw, "0\r\n\r\n")
		_ = bw.Flush()
		return true
	})
	cl := &Client{IdleTimeout: 2 * time.Second}
	defer cl.Close()
	for run := range 5 {
		_, body, reads, err := fetch(context.Background(), cl, e.target, post("{}"))
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		var want strings.Builder
		for i := range events {
			fmt.Fprintf(&want, "data: %d\n\n", i)
		}
		if body != want.String() {
			t.Fatalf("run %d: body of %d bytes in %d reads differs from the %d sent", run, len(body), reads, want.Len())
		}
	}
}

// TestReadsThatFindNothing: events that come apart cost one read each, not a
// read and another that finds the socket empty (what a Read on a Go socket
// does: it tries before it waits).
func TestReadsThatFindNothing(t *testing.T) {
	const events = 20
	e := startEngine(t, func(w net.Conn, _ int) bool {
		pieces := []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"}
		for i := range events {
			pieces = append(pieces, chunk(fmt.Sprintf("data: %d\n\n", i)))
		}
		writeAll(w, append(pieces, "0\r\n\r\n")...)
		return true
	})
	cl := &Client{}
	defer cl.Close()
	_, _, reads, err := fetch(context.Background(), cl, e.target, post("{}"))
	if err != nil {
		t.Fatal(err)
	}
	cl.mu.Lock()
	c := cl.idle[e.target.addr][0]
	cl.mu.Unlock()
	// The first read, after the request, may come before the answer.
	if reads < events/2 || c.misses > 1 {
		t.Errorf("%d reads found nothing while %d events came in %d body reads; want at most 1", c.misses, events, reads)
	}
}

func TestParseTarget(t *testing.T) {
	for _, tt := range []struct{ in, addr, host, prefix, err string }{
		{in: "http://10.0.0.7:8000", addr: "10.0.0.7:8000", host: "10.0.0.7:8000"},
		{in: "http://engine/", addr: "engine:80", host: "engine"},
		{in: "http://[::1]:9/base/", addr: "[::1]:9", host: "[::1]:9", prefix: "/base"},
		{in: "https://engine", err: "want http"},
		{in: "http://", err: "no host"},
		{in: "http://u:p@engine", err: "scheme, host, port and path only"},
		{in: "http://engine/?q=1", err: "scheme, host, port and path only"},
		{in: "http://%zz", err: "invalid URL escape"},
	} {
		tg, err := ParseTarget(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want one saying %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || tg.addr != tt.addr || tg.host != tt.host || tg.prefix != tt.prefix {
			t.Errorf("%s: %+v %v", tt.in, tg, err)
		}
	}
}

// TestClosedClient: a closed client refuses new requests and does not pool
// the connection of one that was running.
func TestClosedClient(t *testing.T) {
	e := startEngine(t, func(w net.Conn, _ int) bool {
		writeAll(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	cl := &Client{}
	err := cl.Do(context.Background(), e.target, post("{}"), func(*Response) error { cl.Close(); return nil },
		func([]byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var ns *NotSentError
	if _, _, _, err := fetch(context.Background(), cl, e.target, post("{}")); !errors.Is(err, ErrClosed) || !errors.As(err, &ns) {
		t.Errorf("after Close: error %v, want ErrClosed, not sent", err)
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.idle) != 0 {
		t.Errorf("a closed client pooled %d addresses", len(cl.idle))
	}
}

// chunk frames s as one chunk.
func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// chunked frames body in chunks cut at the given sizes.
func chunked(body []byte, cuts []int) []byte {
	var b bytes.Buffer
	for len(body) > 0 {
		n := len(body)
		if len(cuts) > 0 {
			n = min(n, max(1, cuts[0]))
			cuts = cuts[1:]
		}
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// feed runs parseHead and takeBody over in, delivered in reads of the given
// sizes into a connection's buffer, as pump would, without a network.
func feed(in []byte, reads []int) (resp *Response, body []byte, done bool, err error) {
	c := &conn{buf: make([]byte, bufSize)}
	headDone := false
	for len(in) > 0 || c.w > c.r {
		n := len(in)
		if len(reads) > 0 {
			n = min(n, max(1, reads[0]))
			reads = reads[1:]
		}
		if c.r == c.w {
			c.r, c.w = 0, 0
		} else if c.r > 0 {
			c.w = copy(c.buf, c.buf[c.r:c.w])
			c.r = 0
		}
		n = min(n, len(c.buf)-c.w)
		if n == 0 && len(in) > 0 {
			return resp, body, false, errors.New("full buffer")
		}
		c.w += copy(c.buf[c.w:], in[:n])
		in = in[n:]
		before := c.r
		if !headDone {
			if resp, err = c.parseHead(http.MethodPost); err != nil {
				return nil, nil, false, err
			}
			if resp == nil {
				if len(in) == 0 {
					return nil, nil, false, nil
				}
				continue
			}
			headDone = true
			if c.framing == framingNone {
				return resp, body, true, nil
			}
		}
		done, err = c.takeBody(func(p []byte) error { body = append(body, p...); return nil })
		if err != nil || done {
			return resp, body, done, err
		}
		if c.r == before && len(in) == 0 {
			break
		}
	}
	return resp, body, done, err
}

// FuzzChunked: any body, chunked at any sizes and read in any pieces,
// decodes to itself.
func FuzzChunked(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\n"), uint64(1))
	f.Add(bytes.Repeat([]byte("x"), 5000), uint64(9))
	f.Fuzz(func(t *testing.T, body []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cuts, reads := make([]int, 20), make([]int, 40)
		for i := range cuts {
			cuts[i] = 1 + rng.IntN(600)
		}
		for i := range reads {
			reads[i] = 1 + rng.IntN(900)
		}
		in := append([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), chunked(body, cuts)...)
		resp, got, done, err := feed(in, reads)
		if err != nil || resp == nil || !done || !bytes.Equal(got, body) {
			t.Fatalf("decoded %q (done %v, err %v), want %q", got, done, err, body)
		}
	})
}

// FuzzAnswer: whatever an engine sends, parsing neither panics nor hands
// out more body than it was sent.
func FuzzAnswer(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), uint64(0))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x\r\nhello\r\n0\r\nT: 1\r\n\r\n"), uint64(3))
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 204 No\r\n\r\n"), uint64(5))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n"), uint64(2))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 2))
		reads := make([]int, 30)
		for i := range reads {
			reads[i] = 1 + rng.IntN(64)
		}
		_, body, _, _ := feed(in, reads)
		if len(body) > len(in) {
			t.Fatalf("%d body bytes from %d bytes sent", len(body), len(in))
		}
	})
}
