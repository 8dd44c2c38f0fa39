package router

import (
	"errors"
	"testing"
)

// TestSetCacheTokens: a backend's cache size changes its view and only its
// view; an unknown backend or a negative size is an error that changes
// nothing.
func TestSetCacheTokens(t *testing.T) {
	r := modelFleet(t, "prefix")
	id := r.ID(1)
	if err := r.SetCacheTokens(id, 5000); err != nil {
		t.Fatal(err)
	}
	for i, v := range r.Views() {
		want := 0
		if i == 1 {
			want = 5000
		}
		if v.CacheTokens != want {
			t.Errorf("backend %d: cache tokens %d, want %d", i, v.CacheTokens, want)
		}
	}
	if err := r.SetCacheTokens(id, -1); err == nil || r.Views()[1].CacheTokens != 5000 {
		t.Errorf("negative size: %v, cache tokens %d; want an error and 5000 kept", err, r.Views()[1].CacheTokens)
	}
	if err := r.SetCacheTokens(BackendID(99), 10); !errors.Is(err, ErrNoBackend) {
		t.Errorf("unknown backend: %v, want ErrNoBackend", err)
	}
}
