package wire

import "testing"

func TestCounts(t *testing.T) {
	var c Counts
	c.Accepted = 4
	c.End("", true)
	c.End("client_cancelled", true)
	c.End("overloaded", false)
	c.End("overloaded", false)
	if c.Completed != 1 || c.Failed["client_cancelled"] != 1 || c.Rejected["overloaded"] != 2 || c.Ended() != 4 {
		t.Fatalf("counts %+v, ended %d", c, c.Ended())
	}
	d := c.Clone()
	d.End("engine_lost", true)
	if c.Failed["engine_lost"] != 0 || d.Failed["engine_lost"] != 1 {
		t.Fatal("a clone shares its maps")
	}
}

func TestCopyBuffer(t *testing.T) {
	b := GetCopyBuffer()
	if len(*b) != 32<<10 {
		t.Fatalf("buffer of %d bytes", len(*b))
	}
	PutCopyBuffer(b)
}

func TestEndsStream(t *testing.T) {
	for name, tt := range map[string]struct {
		in   string
		want bool
	}{
		"done alone":         {"data: [DONE]\n\n", true},
		"event then done":    {"data: {\"choices\":[]}\n\ndata: [DONE]\n\n", true},
		"crlf":               {"data: {}\r\n\r\ndata: [DONE]\r\n\r\n", true},
		"event":              {"data: {\"choices\":[]}\n\n", false},
		"done cut":           {"data: [DONE]\n", false},
		"done in content":    {"data: {\"content\":\"data: [DONE]\\n\\n\"}\n\n", false},
		"empty":              {"", false},
		"done then an event": {"data: [DONE]\n\ndata: {}\n\n", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := EndsStream([]byte(tt.in)); got != tt.want {
				t.Errorf("EndsStream(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
