package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// shardStudy is a small routing study: two fleets, three policies, short
// windows; six runs, so four parts hold two, two, one and one.
var shardStudy = []string{"study", "routing", "--quick", "--policy", "round-robin,random,waw", "--warmup", "20s", "--measure", "10s"}

// wallTimes matches the one figure a sharded and an unsharded run may
// differ in.
var wallTimes = regexp.MustCompile(`"wall_s": [0-9.e+-]+`)

// TestShardedStudyMatchesWhole runs the study as four shards, each its own
// OS process, merges them with stargate report merge and compares the files
// with an unsharded run's: byte for byte, but for the wall times.
func TestShardedStudyMatchesWhole(t *testing.T) {
	dir := t.TempDir()
	var parts []string
	for i := range 4 {
		out := filepath.Join(dir, fmt.Sprintf("part%d", i))
		parts = append(parts, out)
		cmd := exec.Command(os.Args[0], append(shardStudy, "--shard", fmt.Sprintf("%d/4", i), "--out", out, "--parallel", "1")...)
		cmd.Env = append(os.Environ(), asCLI+"=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if err != nil {
			t.Fatalf("shard %d/4: %v: %s", i, err, stderr.String())
		}
		if want := fmt.Sprintf("part %d/4: %d of the study's 6 runs", i, []int{2, 2, 1, 1}[i]); !strings.Contains(string(stdout), want) {
			t.Errorf("shard %d/4 printed %q, want %q", i, stdout, want)
		}
	}
	merged := filepath.Join(dir, "merged")
	// The parts in another order than their indices: the merge orders them.
	code, stdout, stderr := runCLI(t, "report", "merge", parts[2], parts[0], parts[3], parts[1], "--out", merged)
	if code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	whole := filepath.Join(dir, "whole")
	code, wholeOut, stderr := runCLI(t, append(shardStudy, "--out", whole)...)
	if code != 0 {
		t.Fatalf("unsharded run: exit %d: %s", code, stderr)
	}
	if table := func(s string) string { return s[:strings.Index(s, "\n6 runs in")] }; table(stdout) != table(wholeOut) {
		t.Errorf("merge printed\n%s\nthe unsharded run\n%s", stdout, wholeOut)
	}
	for _, name := range []string{"results.json", "table.txt", "report.html"} {
		a, errA := os.ReadFile(filepath.Join(whole, name))
		b, errB := os.ReadFile(filepath.Join(merged, name))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", name, errA, errB)
		}
		if name == "results.json" {
			if n := len(wallTimes.FindAll(a, -1)); n != 6 {
				t.Fatalf("results.json has %d wall times, want 6", n)
			}
			a, b = wallTimes.ReplaceAll(a, []byte(`"wall_s": 0`)), wallTimes.ReplaceAll(b, []byte(`"wall_s": 0`))
			var doc struct{ Runs []json.RawMessage }
			if err := json.Unmarshal(a, &doc); err != nil || len(doc.Runs) != 6 {
				t.Fatalf("results.json: %v, %d runs", err, len(doc.Runs))
			}
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the merged shards (%d bytes) and the unsharded run (%d bytes)", name, len(b), len(a))
		}
	}

	// Parts that do not make a whole are refused with exit 2.
	other := filepath.Join(dir, "other")
	if code, _, stderr := runCLI(t, "study", "routing", "--quick", "--policy", "random", "--warmup", "20s", "--measure", "10s",
		"--shard", "1/4", "--out", other); code != 0 {
		t.Fatalf("other study's shard: exit %d: %s", code, stderr)
	}
	for _, tt := range []struct {
		name string
		dirs []string
		want string
	}{
		{"a part missing", parts[:3], "parts 3 of 4 are missing"},
		{"a part twice", append(append([]string{}, parts...), parts[0]), "part 0/4 given twice"},
		{"another study's part", []string{parts[0], other}, "comes from a different study run"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"report", "merge", "--out", filepath.Join(dir, "bad")}, tt.dirs...)...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.want)
			}
		})
	}
}
