package link

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	cases := []struct {
		name   string
		method string
		uri    string
		host   string
		header http.Header
		body   []byte
	}{
		{"empty", "GET", "/health", "", http.Header{}, nil},
		{"chat", "POST", "/v1/chat/completions?x=1", "gw:1", http.Header{"Content-Type": {"application/json"}, "X-Many": {"a", "b"}}, []byte(`{"messages":[]}`)},
		{"binary body", "POST", "/p", "gw:1", http.Header{}, []byte{0, 1, 2, 255}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := appendRequest(c.method, c.uri, c.host, c.header, c.body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeRequest(p)
			if err != nil {
				t.Fatal(err)
			}
			if got.method != c.method || got.uri != c.uri || got.host != c.host || !reflect.DeepEqual(got.header, c.header) || !bytes.Equal(got.body, c.body) {
				t.Fatalf("decoded %+v, want %s %s %v %q", got, c.method, c.uri, c.header, c.body)
			}
			for i := range len(p) - len(c.body) {
				if _, err := decodeRequest(p[:i]); err == nil {
					t.Fatalf("a request cut to %d of %d bytes decoded", i, len(p))
				}
			}
		})
	}
}

// appendRequest is a whole REQUEST payload, as Transport sends it in parts.
func appendRequest(method, uri, host string, h http.Header, body []byte) ([]byte, error) {
	p, err := appendRequestHead(nil, method, uri, host, h)
	return append(p, body...), err
}

func TestResponseRoundTrip(t *testing.T) {
	h := http.Header{"Content-Type": {"text/event-stream"}, "Retry-After": {"2"}}
	p, err := appendResponse(nil, 503, h)
	if err != nil {
		t.Fatal(err)
	}
	status, got, err := decodeResponse(p)
	if err != nil || status != 503 || !reflect.DeepEqual(got, h) {
		t.Fatalf("decoded %d %v %v", status, got, err)
	}
	if _, _, err := decodeResponse(append(p, 'x')); err == nil {
		t.Fatal("stray bytes after the headers decoded")
	}
	if _, _, err := decodeResponse([]byte{0, 42, 0, 0}); err == nil || !strings.Contains(err.Error(), "status 42") {
		t.Fatalf("status 42: %v", err)
	}
}

func TestHeaderLimits(t *testing.T) {
	big := http.Header{"X-Big": {strings.Repeat("v", maxHeaderBytes)}}
	if _, err := appendRequest("POST", "/", "", big, nil); err == nil {
		t.Fatal("headers over the limit encoded")
	}
	if _, err := appendRequest("POST", "/"+strings.Repeat("p", 70000), "", nil, nil); err == nil {
		t.Fatal("a request URI over 65535 bytes encoded")
	}
}

func TestReadFrame(t *testing.T) {
	var b []byte
	b = appendFrame(b, frameData, 7, []byte("ab"), []byte("cd"))
	b = appendFrame(b, frameEnd, 7)
	fr := frameReader{r: bytes.NewReader(b)}
	typ, id, p, err := fr.next()
	if err != nil || typ != frameData || id != 7 || string(p) != "abcd" {
		t.Fatalf("first frame %d %d %q %v", typ, id, p, err)
	}
	typ, id, p, err = fr.next()
	if err != nil || typ != frameEnd || id != 7 || len(p) != 0 {
		t.Fatalf("second frame %d %d %q %v", typ, id, p, err)
	}
	if _, _, _, err = fr.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
	cut := frameReader{r: bytes.NewReader(b[:11])}
	if _, _, _, err = cut.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a cut frame: %v, want unexpected EOF", err)
	}
	huge := []byte{frameData, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}
	big := frameReader{r: bytes.NewReader(huge)}
	if _, _, _, err = big.next(); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("a 4 GiB frame: %v", err)
	}
}

// FuzzDecode feeds arbitrary bytes to every decoder: errors, never panics.
func TestWindowFrames(t *testing.T) {
	for _, n := range []uint32{1, StreamWindow / 2, StreamWindow} {
		if got, err := decodeWindow(appendWindow(nil, n)); err != nil || got != n {
			t.Errorf("window %d: decoded %d, %v", n, got, err)
		}
	}
	for _, p := range [][]byte{nil, {0, 0, 1}, appendWindow(nil, 0), appendWindow(nil, StreamWindow+1), {0, 0, 0, 1, 0}} {
		if n, err := decodeWindow(p); err == nil {
			t.Errorf("payload %x: decoded %d, want an error", p, n)
		}
	}
}

func FuzzDecode(f *testing.F) {
	req, _ := appendRequest("POST", "/v1/chat/completions", "gw:1", http.Header{"A": {"b"}}, []byte("{}"))
	resp, _ := appendResponse(nil, 200, http.Header{"A": {"b"}})
	f.Add(req)
	f.Add(resp)
	f.Add(appendFrame(nil, frameRequest, 1, req))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRequest(b); err == nil && (r.method == "" || r.uri == "" || r.uri[0] != '/') {
			t.Fatalf("decoded an invalid request %+v", r)
		}
		if status, _, err := decodeResponse(b); err == nil && (status < 100 || status > 999) {
			t.Fatalf("decoded status %d", status)
		}
		if n, err := decodeWindow(b); err == nil && (n == 0 || n > StreamWindow) {
			t.Fatalf("decoded a window of %d", n)
		}
		fr := frameReader{r: bytes.NewReader(b)}
		for {
			if _, _, p, err := fr.next(); err != nil {
				break
			} else if len(p) > MaxFrame {
				t.Fatal("a frame over the limit")
			}
		}
	})
}
