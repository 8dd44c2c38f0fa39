package h1

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// parseHead takes an answer's head from c.buf[c.r:c.w] once all of it is
// there (nil before), skipping interim 1xx answers, and sets the body's
// framing from it.
func (c *conn) parseHead(method string) (*Response, error) {
	for {
		end := headEnd(c.buf[c.r:c.w])
		if end < 0 {
			return nil, nil
		}
		head := c.buf[c.r : c.r+end]
		c.r += end
		resp, proto, err := parseFields(head)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("engine switched protocols (101), which an engine answer may not do")
		case resp.StatusCode < 200:
			continue // interim: the real answer follows
		}
		return resp, c.frame(method, proto, resp)
	}
}

// headEnd is the length of the head at the start of b, its empty line
// included, or -1 while that line has not arrived.
func headEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		empty := j == 0 || (j == 1 && b[i] == '\r')
		i += j + 1
		if empty {
			return i
		}
	}
}

// parseFields reads the status line and the fields of one head.
func parseFields(head []byte) (*Response, string, error) {
	lines := strings.Split(strings.TrimRight(string(head), "\r\n"), "\n")
	status := strings.TrimSuffix(lines[0], "\r")
	proto, rest, _ := strings.Cut(status, " ")
	if proto != "HTTP/1.1" && proto != "HTTP/1.0" {
		return nil, "", fmt.Errorf("engine answered with status line %q, want HTTP/1.x", truncate([]byte(status)))
	}
	code, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(code)
	if err != nil || len(code) != 3 || n < 100 {
		return nil, "", fmt.Errorf("engine answered with status line %q: bad status code", truncate([]byte(status)))
	}
	resp := &Response{StatusCode: n, Header: make(http.Header, len(lines)-1)}
	for _, line := range lines[1:] {
		line = strings.TrimSuffix(line, "\r")
		name, value, ok := strings.Cut(line, ":")
		switch {
		case line != "" && (line[0] == ' ' || line[0] == '\t'):
			return nil, "", errors.New("engine sent a folded header line, which HTTP/1.1 forbids")
		case !ok || !validName(name):
			return nil, "", fmt.Errorf("engine sent a malformed header line %q", truncate([]byte(line)))
		}
		key := textproto.CanonicalMIMEHeaderKey(name)
		resp.Header[key] = append(resp.Header[key], strings.Trim(value, " \t"))
	}
	return resp, proto, nil
}

// frame sets the body's framing and whether the connection may be reused,
// by RFC 9112's rules.
func (c *conn) frame(method, proto string, resp *Response) error {
	h := resp.Header
	c.keep = proto == "HTTP/1.1"
	for _, v := range h["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(tok)) {
			case "close":
				c.keep = false
			case "keep-alive":
				c.keep = c.keep || proto == "HTTP/1.0"
			}
		}
	}
	c.chunk, c.left = chunkSize, 0
	// Differing lengths are an error whatever the answer (as net/http has
	// it): a sign of a broken or smuggling upstream, never to be guessed at.
	if cls := h["Content-Length"]; len(cls) > 1 {
		for _, v := range cls[1:] {
			if v != cls[0] {
				return fmt.Errorf("engine sent differing Content-Length fields %q and %q", cls[0], v)
			}
		}
	}
	switch {
	case method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified:
		c.framing = framingNone
		return nil
	case len(h["Transfer-Encoding"]) > 0:
		if te := strings.Join(h["Transfer-Encoding"], ","); !strings.EqualFold(strings.TrimSpace(te), "chunked") {
			return fmt.Errorf("engine used transfer coding %q; this client decodes chunked only", te)
		}
		if len(h["Content-Length"]) > 0 || proto == "HTTP/1.0" {
			// Both framings, or chunked from an HTTP/1.0 server: read it
			// chunked and close the connection after (RFC 9112, 6.1 and 6.3).
			c.keep = false
		}
		c.framing = framingChunked
		return nil
	case len(h["Content-Length"]) > 0:
		cl := h["Content-Length"][0]
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || n < 0 || strings.IndexFunc(cl, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
			return fmt.Errorf("engine sent a bad Content-Length %q", cl)
		}
		c.framing, c.left = framingLength, n
		if n == 0 {
			c.framing = framingNone
		}
		return nil
	}
	c.framing, c.keep = framingClose, false
	return nil
}
