package h1

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/rawio"
)

// spec is one engine answer, drawn from fuzz input by drawSpec: what the
// differential fuzz test has both clients read.
type spec struct {
	raw      []byte   // the answer on the wire
	writes   []int    // the sizes of the server's writes (the rest in one)
	fields   []string // the field names drawn, whose values must match
	mangled  string   // how it was broken, "" for a well-formed answer
	mustFail bool     // the break is one both clients must report
}

// draw takes bytes from fuzz input, zeros once it runs out.
type draw struct{ b []byte }

func (d *draw) byte() byte {
	if len(d.b) == 0 {
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *draw) intn(n int) int { return int(d.byte()) % n }

func (d *draw) bytes(max int) []byte {
	n := min(d.intn(max+1), len(d.b))
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

// Answer framings.
const (
	byLength = iota
	byChunks
	byClose
	framings
)

// Ways drawSpec breaks an answer; noMangle leaves it whole.
const (
	noMangle      = iota
	truncateBody  // the connection closes partway through the body
	badChunkSize  // a chunk size line that is not hex
	twoLengths    // two differing Content-Length fields
	badStatus     // a status code that is not three digits
	noColon       // a field line without a colon
	lengthTooLong // Content-Length more than the body: the close ends it early
	mangles
)

var codes = []int{200, 201, 202, 204, 206, 299, 304, 400, 404, 408, 429, 500, 502, 503, 599}

var fieldNames = []string{"Content-Type", "X-Stargate-Worker", "Cache-Control", "X-A", "Retry-After"}

// drawSpec builds an answer from fuzz input: a status, a few fields with
// printable values, a body framed by Content-Length, chunks (of drawn
// sizes, hex in either case, maybe with extensions and a trailer) or the
// connection's end, maybe an interim 100 before it, maybe broken one way
// (a quarter of inputs), and cut into drawn writes.
func drawSpec(in []byte) spec {
	d := &draw{b: in}
	var s spec
	var b bytes.Buffer
	code := codes[d.intn(len(codes))]
	framing := d.intn(framings)
	mangle := noMangle
	if d.intn(4) == 0 {
		mangle = 1 + d.intn(mangles-1)
	}
	proto := "HTTP/1.1"
	// HTTP/1.0 with chunks is a deliberate difference (see
	// FuzzAgainstNetHTTP), so HTTP/1.0 answers are framed otherwise.
	if framing != byChunks && d.intn(4) == 0 {
		proto = "HTTP/1.0"
	}
	if d.intn(5) == 0 {
		b.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	}
	status := strconv.Itoa(code)
	if mangle == badStatus {
		status = status[:2] + "x"
	}
	fmt.Fprintf(&b, "%s %s %s\r\n", proto, status, http.StatusText(code))
	for range d.intn(4) {
		name := fieldNames[d.intn(len(fieldNames))]
		value := strings.Map(func(r rune) rune {
			if r < 0x21 || r > 0x7e {
				return -1
			}
			return r
		}, string(d.bytes(12)))
		fmt.Fprintf(&b, "%s: %s\r\n", name, value)
		s.fields = append(s.fields, name)
	}
	if mangle == noColon {
		b.WriteString("X-Broken value\r\n")
	}
	body := d.bytes(200)
	bodyless := code == http.StatusNoContent || code == http.StatusNotModified
	switch framing {
	case byLength:
		n := len(body)
		if mangle == lengthTooLong {
			n += 1 + d.intn(10)
		}
		fmt.Fprintf(&b, "Content-Length: %d\r\n", n)
		if mangle == twoLengths {
			fmt.Fprintf(&b, "Content-Length: %d\r\n", n+1)
		}
	case byChunks:
		b.WriteString("Transfer-Encoding: chunked\r\n")
	case byClose:
		b.WriteString("Connection: close\r\n")
	}
	b.WriteString("\r\n")
	headLen := b.Len()
	if bodyless {
		body = nil
	}
	switch {
	case bodyless:
	case framing == byChunks:
		upper := d.intn(2) == 0
		for rest, first := body, true; ; first = false {
			n := min(1+d.intn(64), len(rest))
			size := strconv.FormatInt(int64(n), 16)
			if upper {
				size = strings.ToUpper(size)
			}
			if first && mangle == badChunkSize {
				size = "z" + size
			}
			if d.intn(4) == 0 {
				size += ";ext=1"
			}
			if n == 0 {
				b.WriteString("0\r\n")
				if d.intn(3) == 0 {
					b.WriteString("X-Trailer: t\r\n")
				}
				b.WriteString("\r\n")
				break
			}
			fmt.Fprintf(&b, "%s\r\n%s\r\n", size, rest[:n])
			rest = rest[n:]
		}
	default:
		b.Write(body)
	}
	s.raw = b.Bytes()
	if mangle == truncateBody {
		if cut := len(s.raw) - headLen; cut > 0 {
			s.raw = s.raw[:headLen+d.intn(cut)]
		} else {
			mangle = noMangle // nothing to cut
		}
	}
	for range d.intn(6) {
		s.writes = append(s.writes, 1+d.intn(64))
	}
	names := []string{"", "truncate", "bad chunk size", "two lengths", "bad status", "no colon", "length too long"}
	s.mangled = names[mangle]
	framed := framing != byClose && !bodyless
	switch mangle {
	case badStatus, noColon:
		s.mustFail = true
	case twoLengths, lengthTooLong:
		s.mustFail = framing == byLength && !bodyless
	case badChunkSize:
		s.mustFail = framing == byChunks && !bodyless && len(body) > 0
	case truncateBody:
		s.mustFail = framed
	}
	return s
}

// answerOnce serves raw on ln's next connection after reading its request
// head, in the sizes of writes, then closes the connection.
func answerOnce(ln net.Listener, s spec) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a hang guard
	var head []byte
	buf := make([]byte, 1024)
	for !bytes.Contains(head, []byte("\r\n\r\n")) {
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		head = append(head, buf[:n]...)
	}
	rest := s.raw
	for _, w := range s.writes {
		w = min(w, len(rest))
		if _, err := c.Write(rest[:w]); err != nil {
			return err
		}
		rest = rest[w:]
	}
	_, err = c.Write(rest)
	return err
}

// outcome is what a client made of an answer.
type outcome struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func viaH1(ctx context.Context, addr string) outcome {
	cl := &Client{}
	defer cl.Close()
	t, err := ParseTarget("http://" + addr)
	if err != nil {
		return outcome{err: err}
	}
	var o outcome
	o.err = cl.Do(ctx, t, &Request{Method: http.MethodGet, Path: "/x"},
		func(r *Response) error { o.status, o.header = r.StatusCode, r.Header; return nil },
		func(p []byte) error { o.body = append(o.body, p...); return nil })
	return o
}

func viaNetHTTP(ctx context.Context, addr string) outcome {
	tr := &http.Transport{DisableKeepAlives: true, DisableCompression: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/x", nil)
	if err != nil {
		return outcome{err: err}
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode, header: resp.Header}
	o.body, o.err = io.ReadAll(resp.Body)
	return o
}

// FuzzAgainstNetHTTP: the same answer, served on loopback in drawn
// pieces, reads the same through this client and through net/http: the
// same status, the same values of the fields drawn, the same body; a
// broken answer is an error for both. Deliberate differences, not drawn:
// chunks in an HTTP/1.0 answer (net/http ignores Transfer-Encoding there
// and reads to the close; this client decodes the chunks, as RFC 9112 asks
// of a recipient), and trailers (net/http reports them, this client drops
// them; the gateway has no use for them).
func FuzzAgainstNetHTTP(f *testing.F) {
	if !rawio.Supported {
		f.Skip("package rawio does not run on this platform")
	}
	// Each seed is read in drawSpec's order: status, framing, break, proto,
	// interim 100, fields, body, chunking, writes.
	f.Add([]byte("\x00\x00\x01\x01\x01\x01\x00\x0atext/plain\x05hello\x02\x03\x07"))                                         // 200, Content-Length, in 3 writes
	f.Add([]byte("\x00\x01\x01\x01\x00\x1bdata: {\"a\":1}\n\ndata: [DONE]\x00\x09\x00\x1f\x01\x00\x01\x00\x03\x05\x01\x20")) // chunked, HEX;ext, trailer
	f.Add([]byte("\x01\x02\x01\x00\x00\x00\x10streamed answer!\x01\x04"))                                                    // 100, then HTTP/1.0 201 to the close
	f.Add([]byte("\x00\x01\x00\x01\x01\x00\x08data: {}\x01\x03\x01\x03\x01\x00\x01\x01\x00"))                                // a bad chunk size
	f.Add([]byte("\x00\x00\x00\x00\x01\x01\x00\x04body\x02\x00"))                                                            // cut short
	f.Add([]byte("\x03\x00\x01\x01\x01\x00\x05bytes\x00"))                                                                   // 204 with a length
	f.Add([]byte("\x00\x00\x00\x02\x01\x01\x00\x02ok\x00"))                                                                  // two lengths
	f.Add([]byte("\x08\x00\x00\x04\x01\x01\x00\x02no\x00"))                                                                  // 404, a field without a colon
	f.Fuzz(func(t *testing.T, in []byte) {
		s := drawSpec(in)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ln.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
		defer cancel()
		read := func(via func(context.Context, string) outcome) outcome {
			served := make(chan struct{})
			go func() {
				defer close(served)
				_ = answerOnce(ln, s) // it may fail writing to a client that gave up: not the test's concern
			}()
			o := via(ctx, ln.Addr().String())
			<-served
			return o
		}
		a, b := read(viaH1), read(viaNetHTTP)
		if ctx.Err() != nil {
			t.Fatalf("answer %q: a client hung", s.raw)
		}
		if (a.err != nil) != (b.err != nil) {
			t.Fatalf("answer %q (%s): h1 error %v, net/http error %v; want both or neither", s.raw, s.mangled, a.err, b.err)
		}
		if s.mustFail && a.err == nil {
			t.Fatalf("answer %q (%s): both read it without an error", s.raw, s.mangled)
		}
		if a.err != nil {
			return
		}
		if a.status != b.status {
			t.Fatalf("answer %q: status %d by h1, %d by net/http", s.raw, a.status, b.status)
		}
		for _, name := range s.fields {
			if got, want := a.header.Values(name), b.header.Values(name); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("answer %q: %s %q by h1, %q by net/http", s.raw, name, got, want)
			}
		}
		if !bytes.Equal(a.body, b.body) {
			t.Fatalf("answer %q: body %q by h1, %q by net/http", s.raw, a.body, b.body)
		}
	})
}
