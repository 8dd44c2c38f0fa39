package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/engine"
)

func TestLoadProfile(t *testing.T) {
	if p, err := LoadProfile("full"); err != nil || p != engine.FullProfile() {
		t.Fatalf("built-in full: %+v %v", p, err)
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("h100.yaml", "base_ms: 3\nper_decode_seq_ms: 0.05\nkv_tokens: 2000000\n")
	p, err := LoadProfile(good)
	if err != nil {
		t.Fatal(err)
	}
	// Fields left out keep the half profile's values.
	want := engine.HalfProfile()
	want.Name, want.BaseMs, want.PerDecodeSeqMs, want.KVTokens = "h100", 3, 0.05, 2_000_000
	if p != want {
		t.Errorf("profile %+v, want %+v", p, want)
	}
	for name, tt := range map[string]struct{ body, want string }{
		"typo.yaml":    {"base_mss: 3\n", `unknown field "base_mss"`},
		"invalid.yaml": {"max_seqs: 0\n", "max_seqs must be > 0"},
		"empty.yaml":   {"", "is empty"},
		"host.yaml":    {"host_kv_tokens: 1000000\n", "host_kv_load_tokens_per_s must be >= 1 with a host tier"},
		"rate.yaml":    {"host_kv_load_tokens_per_s: 1e5\n", "needs host_kv_tokens > 0"},
	} {
		if _, err := LoadProfile(write(name, tt.body)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tt.want)
		}
	}
	if _, err := LoadProfile(filepath.Join(dir, "nope.yaml")); err == nil || !strings.Contains(err.Error(), "neither a built-in profile") {
		t.Errorf("missing file: %v", err)
	}
}
