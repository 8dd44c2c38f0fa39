package openai

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// manyMessages is a chat body with n messages and a tail of pad bytes.
func manyMessages(n, pad int) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"role":"user","content":"x"}`)
	}
	b.WriteString(`],"user":"` + strings.Repeat("p", pad) + `"}`)
	return b.String()
}

func TestReadBodyRefusesTooManyMessagesBeforeTheEnd(t *testing.T) {
	body := manyMessages(100_000, 1<<20)
	cr := &countingReader{r: strings.NewReader(body)}
	_, err := ReadBody(cr, DefaultMaxMessages)
	var tm *TooManyMessagesError
	if !errors.As(err, &tm) || tm.Max != DefaultMaxMessages {
		t.Fatalf("ReadBody: %v, want a TooManyMessagesError", err)
	}
	if cr.n >= len(body)/2 {
		t.Errorf("read %d of %d bytes before refusing; want it refused well before the end", cr.n, len(body))
	}
}

func TestReadBodyCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		max  int
		over bool
	}{
		{"at the cap", manyMessages(3, 0), 3, false},
		{"one over", manyMessages(4, 0), 3, true},
		{"upper-case key", `{"MESSAGES":[1,2,3,4]}`, 3, true},
		{"escaped key", `{"m\u0065ssages":[1,2,3,4]}`, 3, true},
		{"nested arrays count once", `{"messages":[[1,2,3,4,5]]}`, 3, false},
		{"other key", `{"prompt":[1,2,3,4,5]}`, 3, false},
		{"key inside a value", `{"user":"messages","x":[1,2,3,4,5]}`, 3, false},
		{"strings with brackets", `{"messages":["[,,,]","],[",",,"]}`, 3, false},
		{"deeper messages key", `{"a":{"messages":[1,2,3,4,5]}}`, 3, false},
		{"empty", `{"messages":[ ]}`, 3, false},
		{"no cap", manyMessages(50, 0), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadBody(strings.NewReader(tc.body), tc.max)
			var tm *TooManyMessagesError
			if over := errors.As(err, &tm); over != tc.over {
				t.Fatalf("ReadBody: err %v; want over the cap %v", err, tc.over)
			}
			if !tc.over && string(got) != tc.body {
				t.Errorf("ReadBody returned %q, want the body", got)
			}
		})
	}
}

// FuzzReadBody checks the count while reading against encoding/json's.
func FuzzReadBody(f *testing.F) {
	f.Add(manyMessages(5, 3), 4)
	f.Add(`{"messages":["a\"],[",{"b":[1,2]},3]}`, 2)
	f.Add(`{"Messages":[1,2],"messages":[1]}`, 1)
	f.Fuzz(func(t *testing.T, body string, maxMessages int) {
		if maxMessages < 1 || maxMessages > 64 {
			return
		}
		_, err := ReadBody(strings.NewReader(body), maxMessages)
		var req Request
		if json.Unmarshal([]byte(body), &req) != nil {
			return
		}
		var tm *TooManyMessagesError
		if len(req.Messages) > maxMessages && !errors.As(err, &tm) {
			t.Fatalf("%d messages passed the cap of %d: %q", len(req.Messages), maxMessages, body)
		}
	})
}
