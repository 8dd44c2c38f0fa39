package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestParseRejects: every bad command line gets an error naming the flag.
func TestParseRejects(t *testing.T) {
	ok := []string{"--router", "http://127.0.0.1:1", "--router-pid", "1", "--hmac-key-file", "k"}
	if _, err := parse(ok); err != nil {
		t.Fatalf("good flags refused: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--router-pid", "1", "--hmac-key-file", "k"}, "--router"},
		{[]string{"--router", "127.0.0.1:1", "--router-pid", "1", "--hmac-key-file", "k"}, "--router"},
		{[]string{"--router", "http://127.0.0.1:1", "--hmac-key-file", "k"}, "--router-pid"},
		{[]string{"--router", "http://127.0.0.1:1", "--router-pid", "1"}, "--hmac-key-file"},
		{append(ok[:len(ok):len(ok)], "--gateways", "0"), "gateways"},
		{append(ok[:len(ok):len(ok)], "--interval", "1ms"), "interval"},
	} {
		_, err := parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q) = %v, want an error about %s", tc.args, err, tc.want)
		}
	}
}

// TestProcReadsSelf: the /proc readers see this process's CPU and memory.
func TestProcReadsSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	x := uint64(1)
	for i := range 50_000_000 {
		x = x*6364136223846793005 + uint64(i)
	}
	cpu, err := procCPU(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Fatalf("procCPU = %v, %v (x %d)", cpu, err, x)
	}
	rss, peak, err := procMem(os.Getpid())
	if err != nil || rss <= 0 || peak < rss {
		t.Fatalf("procMem = %v, %v, %v", rss, peak, err)
	}
	if _, err := procCPU(-1); err == nil {
		t.Error("procCPU of no process: no error")
	}
}

// TestFleetCounts: each gateway's address counts its own requests and
// probes, and refuses what a gateway would not serve.
func TestFleetCounts(t *testing.T) {
	f := newFleet(2)
	do := func(i int, method, path string) int {
		rec := httptest.NewRecorder()
		f.gateway(i).ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("{}")))
		return rec.Code
	}
	if do(1, http.MethodPost, "/v1/chat/completions") != http.StatusOK || do(1, http.MethodGet, "/health") != http.StatusOK {
		t.Fatal("a completion or a probe was refused")
	}
	if do(0, http.MethodGet, "/link") != http.StatusNotFound {
		t.Error("a link upgrade was not refused")
	}
	if f.received[1].Load() != 1 || f.received[0].Load() != 0 || f.probes.Load() != 1 || f.seen() != 1 {
		t.Errorf("received %d and %d, probes %d, seen %d; want 0, 1, 1, 1", f.received[0].Load(), f.received[1].Load(), f.probes.Load(), f.seen())
	}
}
