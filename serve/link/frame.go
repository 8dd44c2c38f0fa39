package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Proto is the Upgrade token of a link; Path is where a gateway accepts it.
const (
	Proto = "stargate-link/2"
	Path  = "/v1/stargate/link"
)

// Frame types.
const (
	frameRequest  byte = 1
	frameResponse byte = 2
	frameData     byte = 3
	frameEnd      byte = 4
	frameReset    byte = 5
	frameGoAway   byte = 6
	frameWindow   byte = 7
)

const (
	headerLen = 9
	// MaxFrame bounds one frame's payload; a larger request body goes over
	// plain HTTP instead (Transport).
	MaxFrame = 16 << 20
	// maxHeaderBytes bounds the encoded headers of a request or response.
	maxHeaderBytes = 1 << 20
	// StreamWindow is how many response body bytes a gateway may send on a
	// stream beyond what the router's reader has taken: the stream's flow
	// control window, which WINDOW frames reopen as the reader reads.
	StreamWindow = 256 << 10
)

// appendWindow encodes a WINDOW frame's payload: the bytes the gateway may
// send on the stream in addition to what it could before.
func appendWindow(b []byte, n uint32) []byte { return binary.BigEndian.AppendUint32(b, n) }

// decodeWindow decodes a WINDOW frame's payload.
func decodeWindow(p []byte) (uint32, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("link: WINDOW payload of %d bytes, want 4", len(p))
	}
	n := binary.BigEndian.Uint32(p)
	if n == 0 || n > StreamWindow {
		return 0, fmt.Errorf("link: WINDOW of %d bytes, want 1-%d", n, StreamWindow)
	}
	return n, nil
}

var errFrameTooLarge = fmt.Errorf("link: frame payload over %d bytes", MaxFrame)

// appendFrame appends a frame of type typ for stream id whose payload is the
// concatenation of parts.
func appendFrame(b []byte, typ byte, id uint32, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b = append(b, typ)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// frameReader reads frames from one connection into a buffer it reuses.
type frameReader struct {
	r       io.Reader
	scratch []byte
}

// next reads one frame and returns its type, stream id and payload, which
// is valid until the next call.
func (f *frameReader) next() (typ byte, id uint32, payload []byte, err error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(f.r, h[:]); err != nil {
		return 0, 0, nil, err
	}
	typ, id = h[0], binary.BigEndian.Uint32(h[1:5])
	n := binary.BigEndian.Uint32(h[5:9])
	if n > MaxFrame {
		return 0, 0, nil, errFrameTooLarge
	}
	if cap(f.scratch) < int(n) {
		f.scratch = make([]byte, n)
	}
	payload = f.scratch[:n]
	if _, err := io.ReadFull(f.r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, 0, nil, err
	}
	return typ, id, payload, nil
}

func appendString16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendString32(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// appendHeader encodes h as a count and key/value pairs, one per value.
func appendHeader(b []byte, h http.Header) ([]byte, error) {
	start := len(b)
	count := 0
	for _, vs := range h {
		count += len(vs)
	}
	if count > 0xffff {
		return nil, fmt.Errorf("link: %d header values, at most %d", count, 0xffff)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(count))
	for k, vs := range h {
		if len(k) > 0xffff {
			return nil, fmt.Errorf("link: header name of %d bytes", len(k))
		}
		for _, v := range vs {
			b = appendString16(b, k)
			b = appendString32(b, v)
		}
	}
	if len(b)-start > maxHeaderBytes {
		return nil, fmt.Errorf("link: headers of %d bytes, at most %d", len(b)-start, maxHeaderBytes)
	}
	return b, nil
}

// decoder reads the fields of a payload; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("link: truncated %s", what)
	}
	d.b = nil
}

func (d *decoder) uint16(what string) int {
	if len(d.b) < 2 {
		d.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint16(d.b)
	d.b = d.b[2:]
	return int(v)
}

func (d *decoder) bytes(n int, what string) string {
	if n < 0 || len(d.b) < n {
		d.fail(what)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) string16(what string) string { return d.bytes(d.uint16(what), what) }

func (d *decoder) string32(what string) string {
	if len(d.b) < 4 {
		d.fail(what)
		return ""
	}
	n := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	if n > uint32(len(d.b)) {
		d.fail(what)
		return ""
	}
	return d.bytes(int(n), what)
}

func (d *decoder) header() http.Header {
	start := len(d.b)
	n := d.uint16("header count")
	h := make(http.Header, n)
	for range n {
		k := d.string16("header name")
		v := d.string32("header value")
		if d.err != nil {
			return nil
		}
		h[k] = append(h[k], v)
	}
	if start-len(d.b) > maxHeaderBytes {
		d.err = fmt.Errorf("link: headers over %d bytes", maxHeaderBytes)
		return nil
	}
	return h
}

// request is a decoded REQUEST payload.
type request struct {
	method, uri, host string
	header            http.Header
	body              []byte
}

// appendRequestHead encodes a REQUEST payload up to its body, which follows
// it in the frame.
func appendRequestHead(b []byte, method, uri, host string, h http.Header) ([]byte, error) {
	if len(method) > 0xffff || len(uri) > 0xffff || len(host) > 0xffff {
		return nil, errors.New("link: method, request URI or host over 65535 bytes")
	}
	b = appendString16(b, method)
	b = appendString16(b, uri)
	b = appendString16(b, host)
	return appendHeader(b, h)
}

func decodeRequest(p []byte) (request, error) {
	d := decoder{b: p}
	r := request{method: d.string16("method"), uri: d.string16("request URI"), host: d.string16("host")}
	r.header = d.header()
	if d.err != nil {
		return request{}, d.err
	}
	if r.method == "" || r.uri == "" || r.uri[0] != '/' {
		return request{}, fmt.Errorf("link: request %q %q: want a method and a path", r.method, r.uri)
	}
	r.body = append([]byte(nil), d.b...)
	return r, nil
}

func appendResponse(b []byte, status int, h http.Header) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, uint16(status))
	return appendHeader(b, h)
}

func decodeResponse(p []byte) (int, http.Header, error) {
	d := decoder{b: p}
	status := d.uint16("status")
	h := d.header()
	if d.err != nil {
		return 0, nil, d.err
	}
	if len(d.b) != 0 {
		return 0, nil, fmt.Errorf("link: %d stray bytes after a response's headers", len(d.b))
	}
	if status < 100 || status > 999 {
		return 0, nil, fmt.Errorf("link: response status %d", status)
	}
	return status, h, nil
}
