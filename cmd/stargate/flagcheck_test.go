package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
)

// Every bad flag is refused before any work starts: exit 2, one line naming
// the flag and what it accepts, nothing on stdout and nothing written.
func TestFlagsCheckedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	unwritable := filepath.Join(file, "out") // a directory below a file
	tests := []struct {
		name string
		args []string
		want []string // every one must be in the error line
	}{
		{"routing: unknown policy", []string{"study", "routing", "--policy", "nosuch"}, []string{"--policy", `unknown policy "nosuch"`, "pulsar-waw"}},
		{"routing: live-only flags without --live", []string{"study", "routing", "--scale", "0.2", "--seed", "3"}, []string{"--scale, --seed only apply with --live"}},
		{"routing live: unknown policy", []string{"study", "routing", "--live", "--policy", "nosuch"}, []string{"--policy", `unknown policy "nosuch"`, "pressure", "pulsar-waw"}},
		{"routing live: unknown fleet", []string{"study", "routing", "--live", "--fleet", "nowhere"}, []string{"--fleet", "three-site", "nor a fleet file"}},
		{"routing: unwritable out", []string{"study", "routing", "--out", unwritable}, []string{"--out", "give a directory"}},
		{"sim: unknown policy in a list", []string{"sim", "--policy", "waw,nosuch"}, []string{`unknown policy "nosuch"`}},
		{"sim: fleet is a directory", []string{"sim", "--fleet", dir}, []string{"--fleet", "nor a fleet file"}},
		{"sim: unwritable out", []string{"sim", "--out", unwritable}, []string{"--out"}},
		{"sim: unknown class", []string{"sim", "--class", "nope"}, []string{"--class", `unknown class "nope"`, "multiturn"}},
		{"resilience: unknown policy", []string{"study", "resilience", "--policy", "pressure-no-net,nosuch"}, []string{`unknown policy "nosuch"`, "pressure-no-net"}},
		{"resilience: unwritable out", []string{"study", "resilience", "--out", unwritable}, []string{"--out"}},
		{"resilience: backward seed range", []string{"study", "resilience", "--seeds", "40-31"}, []string{"--seeds", "runs backwards"}},
		{"resilience: seeds and replicates disagree", []string{"study", "resilience", "--seeds", "1-3", "--replicates", "2"}, []string{"2 replicates but 3 seeds"}},
		{"overlap: unwritable out", []string{"study", "overlap", "--out", unwritable}, []string{"--out"}},
		{"slo matrix: unknown fleet", []string{"study", "slo-matrix", "--fleet", "three-sit"}, []string{"--fleet", "three-site"}},
		{"slo matrix: unwritable out", []string{"study", "slo-matrix", "--out", unwritable}, []string{"--out"}},
		{"fleet: unknown fleet", []string{"fleet", "--fleet", "three-sit"}, []string{"--fleet"}},
		{"fleet: unknown policy", []string{"fleet", "--policy", "nosuch"}, []string{`unknown policy "nosuch"`}},
		{"router: unknown policy", []string{"router", "--policy", "nosuch"}, []string{`unknown policy "nosuch"`}},
		{"fleet: unknown engine transport", []string{"fleet", "--engine-transport", "rawio"}, []string{"--engine-transport", `unknown engine transport "rawio"`, "net-http or h1"}},
		{"gateway: unknown engine transport", []string{"gateway", "--engine", "http://127.0.0.1:1", "--engine-transport", "h2"}, []string{"--engine-transport", `"h2"`}},
		{"router: unknown gateway engine transport", []string{"router", "--gateway-engine-transport", "x"}, []string{"--gateway-engine-transport"}},
		{"drive: unknown fleet", []string{"drive", "--target", "http://127.0.0.1:1", "--fleet", "nowhere"}, []string{"--fleet"}},
		{"drive: unwritable out", []string{"drive", "--target", "http://127.0.0.1:1", "--out", unwritable}, []string{"--out"}},
		{"plan: unknown policy", []string{"plan", "simulate", "--policy", "nosuch", "--cdf", "x.json", "--lam", "1", "--pools", "a:h100-llama3.1-8b:100:1"}, []string{`unknown policy "nosuch"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "stargate: ") {
				t.Errorf("stderr %q: want one line starting with %q", stderr, "stargate: ")
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if stdout != "" {
				t.Errorf("stdout %q: want nothing before the work starts", stdout)
			}
		})
	}
}

// --out is made and checked before the work: a directory that did not exist
// is there after a run refused for another reason.
func TestOutCheckedFirst(t *testing.T) {
	out := filepath.Join(t.TempDir(), "new", "dir")
	code, _, stderr := runCLI(t, "sim", "--out", out, "--rps", "lots")
	if code != 2 {
		t.Fatalf("exit %d, want 2 (%s)", code, stderr)
	}
	if st, err := os.Stat(out); err != nil || !st.IsDir() {
		t.Errorf("--out %s not made by the check: %v", out, err)
	}
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) != 0 {
		t.Errorf("the check left files in --out: %v, %v", entries, err)
	}
}

// The old spellings still work, say they are deprecated, and are hidden
// from the help.
func TestDeprecatedFlagAliases(t *testing.T) {
	tests := []struct {
		args     []string
		alias    string
		want     string // the canonical flag's error, proving the alias set it
		helpArgs []string
	}{
		{[]string{"study", "slo-matrix", "--policies", "nosuch"}, "--policies", `--policy: unknown policy "nosuch"`, []string{"study", "slo-matrix", "--help"}},
		{[]string{"study", "overlap", "--seeds", "x"}, "--seeds", `invalid argument "x"`, []string{"study", "overlap", "--help"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[:2], " "), func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.want)
			}
			if strings.Contains(tt.want, "invalid argument") {
				return // a parse error comes before the deprecation notice
			}
			if !strings.Contains(stderr, tt.alias+" is deprecated") {
				t.Errorf("stderr %q: no deprecation notice for %s", stderr, tt.alias)
			}
			_, help, _ := runCLI(t, tt.helpArgs...)
			if strings.Contains(help, tt.alias+" ") {
				t.Errorf("help lists the deprecated %s:\n%s", tt.alias, help)
			}
		})
	}
	// The alias sets the canonical flag: the overlap study's replicates
	// check sees the value given as --seeds.
	code, _, stderr := runCLI(t, "study", "overlap", "--seeds", "-1", "--out", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "--replicates -1") {
		t.Errorf("--seeds -1: exit %d, stderr %q; want the replicates check to refuse it", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(stdout, "stargate ") || !strings.Contains(stdout, "go1.") {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// Shell completion offers the registries' names, after the last comma of a
// list.
func TestCompletion(t *testing.T) {
	policies := policy.NewRegistry().Names()
	tests := []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"sim", "--policy", ""}, policies, nil},
		{[]string{"sim", "--policy", "waw,pu"}, []string{"waw,pulsar-waw", "waw,pressure"}, nil},
		{[]string{"study", "resilience", "--policy", ""}, []string{"pressure-no-net", "pressure"}, nil},
		{[]string{"router", "--policy", ""}, []string{"pressure"}, nil},
		{[]string{"sim", "--fleet", ""}, config.PresetNames(), nil},
		{[]string{"fleet", "--fleet", ""}, []string{"three-site", "hetero"}, nil},
		{[]string{"study", "slo-matrix", "--classes", "multiturn,"}, []string{"multiturn,very_long"}, nil},
		{[]string{"study", "slo-matrix", "--policy", ""}, policies, []string{"pressure-no-net"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"__complete"}, tt.args...)
			if code := run(context.Background(), args, &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			var got []string
			for _, line := range strings.Split(out.String(), "\n") {
				if line != "" && !strings.HasPrefix(line, ":") {
					got = append(got, strings.SplitN(line, "\t", 2)[0])
				}
			}
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("completions %v lack %q", got, w)
				}
			}
			for _, n := range tt.not {
				if slices.Contains(got, n) {
					t.Errorf("completions %v include %q", got, n)
				}
			}
		})
	}
}

// Help texts list the registries' names, so a new policy or fleet shows up
// without editing them.
func TestHelpListsRegistries(t *testing.T) {
	for _, args := range [][]string{{"sim", "--help"}, {"fleet", "--help"}, {"router", "--help"}} {
		t.Run(args[0], func(t *testing.T) {
			code, stdout, _ := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			for _, w := range []string{"pressure", "pulsar-waw"} {
				if !strings.Contains(stdout, w) {
					t.Errorf("%s lacks policy %q", strings.Join(args, " "), w)
				}
			}
			if args[0] != "router" && !strings.Contains(stdout, "three-site") {
				t.Errorf("%s lacks fleet three-site", strings.Join(args, " "))
			}
		})
	}
}

// TestRouterPoolsFile: a router's --pools file is read and checked before
// the router starts: a missing file or a wrong pool is one line, exit 2.
func TestRouterPoolsFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(bad, []byte("- name: short\n  max_tokens: 0\n  backends: [gw-a]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file string
		want string
	}{
		{"missing file", filepath.Join(t.TempDir(), "none.yaml"), "reading pools file"},
		{"max_tokens 0", bad, `pool "short": max_tokens must be >= 1`},
	} {
		code, stdout, stderr := runCLI(t, "router", "--listen", "127.0.0.1:0", "--pools", tc.file)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 || stdout != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want 2 and one line naming %q", tc.name, code, stderr, stdout, tc.want)
		}
	}
}
