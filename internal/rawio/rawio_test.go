package rawio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair is a connected TCP pair: ours wrapped, theirs plain.
func pair(t *testing.T) (ours *Conn, theirs net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := Listener{ln}.Accept()
		accepted <- c
	}()
	theirs, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := <-accepted
	ours, ok := c.(*Conn)
	if !ok {
		t.Fatalf("Listener accepted a %T, want a *Conn", c)
	}
	t.Cleanup(func() { _ = ours.Close(); _ = theirs.Close() })
	return ours, theirs
}

func TestReadWrite(t *testing.T) {
	ours, theirs := pair(t)
	if n, err := ours.Write([]byte("ping")); n != 4 || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	buf := make([]byte, 16)
	if n, err := io.ReadFull(theirs, buf[:4]); n != 4 || err != nil || string(buf[:4]) != "ping" {
		t.Fatalf("peer read %q, %v", buf[:n], err)
	}
	go func() { time.Sleep(20 * time.Millisecond); _, _ = theirs.Write([]byte("pong")) }()
	n, err := ours.Read(buf) // waits for the poller: nothing is there yet
	if err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("Read %q, %v", buf[:n], err)
	}
	if n, err := ours.Read(nil); n != 0 || err != nil {
		t.Errorf("empty Read: %d, %v", n, err)
	}
	if n, err := ours.Write(nil); n != 0 || err != nil {
		t.Errorf("empty Write: %d, %v", n, err)
	}
	_ = theirs.Close()
	if n, err := ours.Read(buf); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("after the peer closed: %d, %v; want io.EOF", n, err)
	}
}

// TestBigWrite: a write larger than the socket's buffers waits for the peer
// to read, then completes whole.
func TestBigWrite(t *testing.T) {
	ours, theirs := pair(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(theirs, int64(len(big))))
		got <- b
	}()
	if n, err := ours.Write(big); n != len(big) || err != nil {
		t.Fatalf("Write: %d of %d, %v", n, len(big), err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("peer read %d bytes, not the %d written", len(b), len(big))
	}
}

// TestDeadlineAndClose: a wait ends at the deadline with a timeout error,
// and at Close from another goroutine with net.ErrClosed.
func TestDeadlineAndClose(t *testing.T) {
	ours, _ := pair(t)
	_ = ours.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	_, err := ours.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v; want a timeout", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Errorf("error %#v, want a *net.OpError for read", err)
	}
	_ = ours.SetReadDeadline(time.Time{})
	time.AfterFunc(20*time.Millisecond, func() { _ = ours.Close() })
	if _, err := ours.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read while closed: %v; want net.ErrClosed", err)
	}
}

// TestWriteToAGonePeer: writing to a connection the peer reset fails with
// the system's error, not a hang.
func TestWriteToAGonePeer(t *testing.T) {
	ours, theirs := pair(t)
	_ = theirs.(*net.TCPConn).SetLinger(0) // close with a reset
	_ = theirs.Close()
	time.Sleep(20 * time.Millisecond)
	var err error
	for range 100 {
		if _, err = ours.Write([]byte("x")); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a reset connection: %v; want ECONNRESET or EPIPE", err)
	}
}

func TestDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	c, err := Dialer(&net.Dialer{})(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, ok := c.(*Conn); !ok {
		t.Errorf("Dialer gave a %T, want a *Conn", c)
	}
	_ = ln.Close()
	if _, err := Dialer(&net.Dialer{})(context.Background(), "tcp", ln.Addr().String()); err == nil {
		t.Error("dialling a closed port succeeded")
	}
}

func TestWrapOther(t *testing.T) {
	a, b := net.Pipe()
	defer func() { _ = a.Close(); _ = b.Close() }()
	if Wrap(a) != a {
		t.Error("Wrap changed a connection that is not TCP")
	}
}

// TestHTTPServer: net/http serves over the Listener: keep-alive, a streamed
// answer, and a client that goes away mid-stream cancels the handler's
// context (net/http's background read on the connection sees it).
func TestHTTPServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; ; i++ {
			if _, err := io.WriteString(w, "data: x\n\n"); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(gone)
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(Listener{ln}) }()
	defer func() { _ = hs.Shutdown(context.Background()) }()
	url := "http://" + ln.Addr().String()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 3 {
		resp, err := client.Get(url + "/hello")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "hello" {
			t.Fatalf("body %q", b)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/stream", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if !strings.HasPrefix(line, "data: x") {
		t.Fatalf("stream began %q", line)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler did not see its client go away")
	}
}
