package poolpick

import (
	"fmt"
	"strings"
	"testing"
)

// TestCheck: each mistake in a pools list is named; a backend the fleet
// does not know is one only when the caller knows the fleet.
func TestCheck(t *testing.T) {
	pool := func(name string, max int, backends ...string) Member {
		return Member{Pool: Pool{Name: name, MaxTokens: max}, Backends: backends}
	}
	known := func(b string) bool { return b != "ghost" }
	names := func() []string { return []string{"a", "b"} }
	for _, tc := range []struct {
		name  string
		pools []Member
		want  string
	}{
		{"no name", []Member{pool("", 1, "a")}, "empty, repeated or reserved"},
		{"repeated", []Member{pool("p", 1, "a"), pool("p", 2, "b")}, "repeated"},
		{"reserved", []Member{pool(Fallback, 1, "a")}, "reserved"},
		{"max tokens", []Member{pool("p", 0, "a")}, "max_tokens must be >= 1"},
		{"no backends", []Member{pool("p", 1)}, "list its backends"},
		{"two pools", []Member{pool("p", 1, "a"), pool("q", 2, "a")}, "belongs to one pool"},
		{"unknown backend", []Member{pool("p", 1, "ghost")}, `backend "ghost" is not in the fleet (backends: [a b])`},
	} {
		if errs := Check(tc.pools, known, names); len(errs) != 1 || !strings.Contains(fmt.Sprint(errs), tc.want) {
			t.Errorf("%s: %v, want one error naming %q", tc.name, errs, tc.want)
		}
	}
	if errs := Check([]Member{pool("p", 1, "ghost")}, nil, nil); len(errs) != 0 {
		t.Errorf("any backend goes without a fleet: %v", errs)
	}
	if errs := Check([]Member{pool("short", 6144, "a"), pool("long", 131072, "b")}, known, names); len(errs) != 0 {
		t.Errorf("good pools: %v", errs)
	}
}
