package httplimit_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/serve/httplimit"
	"github.com/stargate-llm/stargate/serve/openai"
)

// holdingServer serves handle for every request and, on /hold, keeps the
// request (and what handle returned) until release is closed.
func holdingServer(t *testing.T, l httplimit.Limits, handle func(r *http.Request) (any, error)) (addr string, held chan struct{}, release chan struct{}) {
	t.Helper()
	held, release = make(chan struct{}, 64), make(chan struct{})
	addr = start(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := handle(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			select {
			case <-release:
			case <-time.After(3 * hangGuard):
			}
		}
		runtime.KeepAlive(v)
		_, _ = io.WriteString(w, "ok")
	}))
	return addr, held, release
}

func readAll(r *http.Request) (any, error) { return io.ReadAll(r.Body) }

// answer is what a client got.
type answer struct {
	code   int
	header http.Header
	body   string
}

// post posts body to addr+path; chunked sends it without a length. It
// may run on any goroutine.
func post(addr, path string, body []byte, chunked bool) (answer, error) {
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // hides the length: sent chunked
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, rd)
	if err != nil {
		return answer{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return answer{resp.StatusCode, resp.Header, string(got)}, err
}

// send is post on the test's goroutine, failing the test on an error.
func send(t *testing.T, addr, path string, body []byte, chunked bool) answer {
	t.Helper()
	got, err := post(addr, path, body, chunked)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// code is the status of post, or the error in its place, for a goroutine
// to hand the test's own.
func code(addr, path string, body []byte, chunked bool) any {
	got, err := post(addr, path, body, chunked)
	if err != nil {
		return err
	}
	return got.code
}

// TestBodyMemoryBudget: large bodies are charged BodyMemoryFactor times
// their size against MaxBodyMemory; one beyond what is left is refused at
// once with 503 and Retry-After (a declared length before its body is
// read, one of unknown length when the budget runs out midway), one the
// whole budget cannot hold with 413; within the budget they are served,
// and the budget comes back when a request ends.
func TestBodyMemoryBudget(t *testing.T) {
	l := short()
	l.LargeBody, l.MaxLargeBodies, l.BodyReadTimeout = 10, 16, hangGuard
	l.MaxBodyMemory = 250 * httplimit.BodyMemoryFactor // 250 bytes of body
	addr, held, release := holdingServer(t, l, readAll)
	defer http.DefaultClient.CloseIdleConnections()
	b := func(n int) []byte { return bytes.Repeat([]byte("b"), n) }
	done := make(chan any, 1)
	go func() { done <- code(addr, "/hold", b(200), false) }()
	<-held // 200 of 250 taken
	for _, tt := range []struct {
		name    string
		n       int
		chunked bool
		want    int
	}{
		{"over what is left", 100, false, http.StatusServiceUnavailable},
		{"over what is left, of unknown length", 100, true, http.StatusServiceUnavailable},
		{"within what is left", 40, false, http.StatusOK},
		{"within what is left, of unknown length", 40, true, http.StatusOK},
		{"small: not charged", 9, false, http.StatusOK},
		{"more than the whole budget", 300, false, http.StatusRequestEntityTooLarge},
		{"more than the whole budget, of unknown length", 300, true, http.StatusRequestEntityTooLarge},
	} {
		got := send(t, addr, "/", b(tt.n), tt.chunked)
		if got.code != tt.want {
			t.Errorf("%s (%d bytes): status %d, want %d", tt.name, tt.n, got.code, tt.want)
		}
		if retry := got.header.Get("Retry-After"); (tt.want == http.StatusServiceUnavailable) != (retry != "") {
			t.Errorf("%s: status %d with Retry-After %q", tt.name, got.code, retry)
		}
		// A refusal says why, in its own words, even when it came midway
		// and the handler had answered its read error with a 400.
		if tt.want != http.StatusOK && (!strings.Contains(got.body, "--max-body-memory") || strings.Contains(got.body, "httplimit:")) {
			t.Errorf("%s: the answer says %q, want the refusal's own reason", tt.name, got.body)
		}
	}
	close(release)
	if got := <-done; got != http.StatusOK {
		t.Fatalf("the held request: %v", got)
	}
	for _, chunked := range []bool{false, true} {
		if code := send(t, addr, "/", b(240), chunked).code; code != http.StatusOK {
			t.Errorf("240 bytes (chunked %v) once the budget came back: %d, want 200", chunked, code)
		}
	}
}

// chatBody is a chat request of n messages of size bytes each.
func chatBody(n, size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","messages":[`)
	content := strings.Repeat("word ", size/5)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"%s %d"}`, content, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// parseLikeARouter is what a router (and a gateway) does with a body: read
// it counting its messages, decode it, read its prompt.
func parseLikeARouter(r *http.Request) (any, error) {
	body, err := openai.ReadBody(r.Body, openai.DefaultMaxMessages)
	if err != nil {
		return nil, err
	}
	var req openai.Request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	_, lead, _, err := req.PromptTokens(true)
	return []any{body, req, lead}, err
}

// peakHeap serves bodies concurrent requests of body under l, the admitted
// ones held at once, and returns the peak heap growth seen (HeapInuse over
// the heap before) and how many were admitted.
func peakHeap(t *testing.T, l httplimit.Limits, body []byte, bodies int) (peak uint64, admitted int) {
	t.Helper()
	addr, held, release := holdingServer(t, l, parseLikeARouter)
	defer http.DefaultClient.CloseIdleConnections()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var top atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > top.Load() {
				top.Store(ms.HeapInuse - base)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
	codes := make(chan any, bodies)
	var clients sync.WaitGroup
	for range bodies {
		clients.Go(func() { codes <- code(addr, "/hold", body, false) })
	}
	// Every request either is held (admitted and parsed) or was refused.
	refused := 0
	for admitted+refused < bodies {
		select {
		case <-held:
			admitted++
		case got := <-codes:
			if got != http.StatusServiceUnavailable {
				t.Fatalf("a refused request: %v, want status 503", got)
			}
			refused++
		case <-time.After(3 * hangGuard): // parsing 8 MB bodies on a loaded machine
			t.Fatalf("%d held and %d refused of %d", admitted, refused, bodies)
		}
	}
	runtime.ReadMemStats(&ms) // the admitted bodies are all parsed and alive
	close(release)
	clients.Wait()
	close(stop)
	sampler.Wait()
	return max(top.Load(), ms.HeapInuse-min(ms.HeapInuse, base)), admitted
}

// TestBodyMemoryBoundsTheHeap: 16 concurrent 7.6 MB bodies of 4,000
// messages, parsed as a router parses them, with a 64 MiB budget: at most
// two are admitted (each charged about 30 MiB), the rest refused at once,
// and the heap grows by less than twice the budget. Without the budget the
// 16 would all be held (MaxLargeBodies is 16), their parsing alone several
// hundred MiB (STARGATE_HEAP_UNBOUNDED=1 measures it).
func TestBodyMemoryBoundsTheHeap(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocates about 150 MB; a heap measurement means nothing under the race detector")
	}
	body := chatBody(4000, 1900)
	l := short()
	l.BodyReadTimeout, l.WriteTimeout = 3*hangGuard, 3*hangGuard
	l.MaxBodyMemory = 64 << 20
	peak, admitted := peakHeap(t, l, body, 16)
	t.Logf("budget %d MiB, body %.1f MB: %d admitted, peak heap growth %d MiB", l.MaxBodyMemory>>20, float64(len(body))/1e6, admitted, peak>>20)
	if limit := int(l.MaxBodyMemory / (int64(len(body)) * httplimit.BodyMemoryFactor)); admitted < 1 || admitted > limit {
		t.Errorf("%d bodies admitted; want 1 to %d", admitted, limit)
	}
	if peak > uint64(2*l.MaxBodyMemory) {
		t.Errorf("heap grew by %d MiB under a budget of %d MiB", peak>>20, l.MaxBodyMemory>>20)
	}
	if os.Getenv("STARGATE_HEAP_UNBOUNDED") != "" {
		l.MaxBodyMemory = 0
		peak, admitted := peakHeap(t, l, body, 16)
		t.Logf("no budget: %d admitted, peak heap growth %d MiB", admitted, peak>>20)
	}
}

// TestRefusalKeepsAnHTTP2Connection: a refused large body closes an HTTP/1
// connection (the rest of its body is not read) but not an HTTP/2 one,
// whose other streams (a router's requests to a gateway share one) go on;
// Go's HTTP/2 server shuts the connection on a Connection: close header.
func TestRefusalKeepsAnHTTP2Connection(t *testing.T) {
	l := short()
	l.LargeBody, l.MaxBodyMemory = 10, 100*httplimit.BodyMemoryFactor
	h := httplimit.Handler(ok, l)
	for _, major := range []int{1, 2} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("b", 200)))
		r.ProtoMajor, r.ProtoMinor = major, 0
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("HTTP/%d: a body over the whole budget: %d, want 413", major, w.Code)
		}
		if got, want := w.Header().Get("Connection"), map[int]string{1: "close", 2: ""}[major]; got != want {
			t.Errorf("HTTP/%d: Connection %q, want %q", major, got, want)
		}
	}
}

// TestDeclaredBodiesTakeNoMoreThanTheirSize: a body of declared length
// takes its memory a step ahead of its bytes, but never more than its
// length's worth, so a budget that holds n such bodies serves n at once.
// Thirteen 60-byte bodies fit the budget; the step ahead (an eighth of it,
// 97 bytes of body) is more than one.
func TestDeclaredBodiesTakeNoMoreThanTheirSize(t *testing.T) {
	l := short()
	l.LargeBody, l.MaxLargeBodies, l.BodyReadTimeout = 10, 16, hangGuard
	l.MaxBodyMemory = 13 * 60 * httplimit.BodyMemoryFactor
	addr, held, release := holdingServer(t, l, readAll)
	defer http.DefaultClient.CloseIdleConnections()
	body := bytes.Repeat([]byte("b"), 60)
	codes := make(chan any, 12)
	for range 12 {
		go func() { codes <- code(addr, "/hold", body, false) }()
	}
	for i := range 12 {
		select {
		case <-held:
		case got := <-codes:
			t.Fatalf("body %d of twelve that fit the budget: %v", i+1, got)
		case <-time.After(hangGuard):
			t.Fatal("twelve bodies were neither held nor answered")
		}
	}
	if got := send(t, addr, "/", body, false); got.code != http.StatusOK {
		t.Errorf("the thirteenth body, which fits: %d %q", got.code, got.body)
	}
	close(release)
	for range 12 {
		if got := <-codes; got != http.StatusOK {
			t.Errorf("a held body: %v", got)
		}
	}
}

// holdOne serves under l (MaxLargeBodies 1) with one large body held, so
// that every other large body is refused; finish releases it and checks
// that it was served.
func holdOne(t *testing.T, l httplimit.Limits) (addr string, finish func()) {
	t.Helper()
	addr, held, release := holdingServer(t, l, readAll)
	done := make(chan any, 1)
	go func() { done <- code(addr, "/hold", bytes.Repeat([]byte("b"), 100), false) }()
	<-held
	return addr, func() {
		close(release)
		if got := <-done; got != http.StatusOK {
			t.Errorf("the held body: %v", got)
		}
		http.DefaultClient.CloseIdleConnections()
	}
}

// TestRefusedMidwayClientGetsTheAnswer: a simple HTTP/1 client writes its
// whole body before it reads (as Python's http.client does; Go's reads an
// early answer while it writes); a body refused midway (its slot taken) is
// read to its end and thrown away, so such a client, sending 8 MiB, more
// than the sockets' buffers, still gets the 503 and not a reset connection.
func TestRefusedMidwayClientGetsTheAnswer(t *testing.T) {
	l := short()
	l.LargeBody, l.MaxLargeBodies, l.BodyReadTimeout = 10, 1, hangGuard
	addr, finish := holdOne(t, l)
	defer finish()
	c := dial(t, addr)
	w := bufio.NewWriter(c)
	_, _ = io.WriteString(w, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	chunk := bytes.Repeat([]byte("b"), 64<<10)
	for range 128 {
		fmt.Fprintf(w, "%x\r\n%s\r\n", len(chunk), chunk)
	}
	_, _ = io.WriteString(w, "0\r\n\r\n")
	if err := w.Flush(); err != nil {
		t.Fatalf("writing an 8 MiB body refused midway: %v, want it read to its end", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the answer to an 8 MiB body refused midway: %v", err)
	}
	reason, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(reason), "too many large request bodies") {
		t.Errorf("an 8 MiB body refused midway: %d, Retry-After %q, %q; want 503 with them and the reason", resp.StatusCode, resp.Header.Get("Retry-After"), reason)
	}
}

// TestRefusalOutlivesTheDrain: a client refused midway that stops sending
// is drained until its body's read deadline, which ends the request; the
// refusal, written before, still goes out, with a WriteTimeout shorter
// than the wait.
func TestRefusalOutlivesTheDrain(t *testing.T) {
	l := short()
	l.LargeBody, l.MaxLargeBodies = 10, 1
	l.BodyReadTimeout, l.WriteTimeout = time.Second, 100*time.Millisecond
	addr, finish := holdOne(t, l)
	defer finish()
	c := dial(t, addr)
	// 20 bytes, past LargeBody: refused; then nothing more.
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n14\r\n01234567890123456789\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 503") {
		t.Errorf("a client refused midway that then stalled got %q (%v), want the 503", line, err)
	}
}

// TestEarlyRefusalClosesItsConnection: a declared body refused before any
// byte of it is read (here: more than the whole budget) leaves it unread,
// and net/http reads up to 256 KiB of it afterwards to keep the
// connection; the body's read deadline bounds that, so a client that
// sends none loses its connection instead of keeping it for good.
func TestEarlyRefusalClosesItsConnection(t *testing.T) {
	l := short() // BodyReadTimeout 300 ms
	l.LargeBody, l.MaxBodyMemory = 10, 100*httplimit.BodyMemoryFactor
	addr := start(t, l, ok)
	c := dial(t, addr)
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the whole budget: %d, want 413", resp.StatusCode)
	}
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after the refusal the connection gave %v, want it closed within the body's read deadline", err)
	}
}
