package openai

import (
	"bytes"
	"fmt"
	"io"
)

// DefaultMaxMessages is the most messages a chat request may hold.
const DefaultMaxMessages = 4096

// TooManyMessagesError says a body's "messages" array is longer than the
// cap; ReadBody returns it as soon as the array passes the cap, before the
// rest of the body is read.
type TooManyMessagesError struct{ Max int }

func (e *TooManyMessagesError) Error() string {
	return fmt.Sprintf("more than %d messages; send at most %d", e.Max, e.Max)
}

// ReadBody reads a request body whole, as io.ReadAll, and counts the
// elements of its top-level "messages" array while reading: past
// maxMessages (0: no cap) it stops and returns a *TooManyMessagesError, so
// that a body of a million tiny messages is refused before it is parsed or
// even read to its end. Bound the body's size with http.MaxBytesReader
// around r, whose error ReadBody returns as is. The body's JSON is not
// checked here (the decoder that reads it later does); a key spelled with
// escapes, or in other letter case (encoding/json matches keys without
// case), counts as "messages" too.
func ReadBody(r io.Reader, maxMessages int) ([]byte, error) {
	var sc msgScanner
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			if maxMessages > 0 && sc.scan(buf[len(buf):len(buf)+n], maxMessages) {
				return nil, &TooManyMessagesError{Max: maxMessages}
			}
			buf = buf[:len(buf)+n]
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// msgScanner follows a JSON text byte by byte as far as ReadBody needs: the
// nesting depth, strings, the keys of the top-level object, and the
// elements of the arrays under a "messages" key.
type msgScanner struct {
	depth    int
	inString bool
	escape   bool
	// keyNext: the next string at depth 1 is a key.
	keyNext bool
	// inKey: the string being read is a top-level key; key holds its first
	// bytes, keyEscaped whether it had an escape.
	inKey      bool
	key        []byte
	keyEscaped bool
	// candidate: the last key read could be "messages".
	candidate bool
	// counting: inside a messages array (at depth 2); count its elements,
	// pending whether an element has started since the last comma.
	counting bool
	count    int
	pending  bool
}

const messagesKey = "messages"

// scan reads p; true once a messages array has more than maxMessages
// elements.
func (s *msgScanner) scan(p []byte, maxMessages int) bool {
	for _, c := range p {
		if s.inString {
			switch {
			case s.escape:
				s.escape = false
			case c == '\\':
				s.escape = true
				if s.inKey {
					s.keyEscaped = true
				}
			case c == '"':
				s.inString = false
				if s.inKey {
					s.inKey = false
					s.candidate = s.keyEscaped || bytes.EqualFold(s.key, []byte(messagesKey))
				}
			default:
				if s.inKey && len(s.key) <= len(messagesKey) {
					s.key = append(s.key, c)
				}
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if s.counting && s.depth == 2 && c != ']' && c != ',' && !s.pending {
			s.pending = true
			s.count++
			if s.count > maxMessages {
				return true
			}
		}
		switch c {
		case '"':
			s.inString = true
			if s.depth == 1 && s.keyNext {
				s.inKey, s.keyNext, s.keyEscaped = true, false, false
				s.key = s.key[:0]
			}
		case '{', '[':
			s.depth++
			if s.depth == 1 {
				s.keyNext = c == '{'
			}
			if s.depth == 2 && c == '[' && s.candidate {
				s.counting, s.count, s.pending = true, 0, false
			}
		case '}', ']':
			s.depth--
			if s.depth < 2 {
				s.counting = false
			}
		case ',':
			if s.depth == 1 {
				s.keyNext, s.candidate = true, false
			}
			if s.depth == 2 {
				s.pending = false
			}
		}
	}
	return false
}
