package golden

import "testing"

func TestFirstDifference(t *testing.T) {
	for _, c := range []struct{ got, want, say string }{
		{"a\nb\nc", "a\nx\nc", "line 2:\n got  b\n want x"},
		{"a\nb", "a\nb\nc", "line 3:\n got  \n want c"},
		{"a", "a", "no line differs"},
	} {
		if s := firstDifference([]byte(c.got), []byte(c.want)); s != c.say {
			t.Errorf("firstDifference(%q, %q) = %q, want %q", c.got, c.want, s, c.say)
		}
	}
}
