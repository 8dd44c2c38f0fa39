package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/workload"
)

// oneRegion is a valid one-region fleet file, the base of several cases.
const oneRegion = `regions:
  - name: a
    routers: 1
    rtt_ms: {a: 1}
    backends:
      - {name: a-0, gpus: 2}
`

// twoRegions builds a two-region fleet with the given rtt_ms lines.
func twoRegions(rttA, rttB string) string {
	return `regions:
  - name: a
    routers: 1
    rtt_ms: ` + rttA + `
    backends: [{name: a-0, gpus: 1}]
  - name: b
    routers: 1
    rtt_ms: ` + rttB + `
    backends: [{name: b-0, gpus: 1}]
`
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// run, if set, replaces studyRun.
		run *Run
		// parse is true when Parse itself must fail; otherwise Parse must
		// succeed and SimConfig fail.
		parse bool
		want  []string // substrings of the error message
	}{
		{
			name: "unknown top-level key", parse: true,
			yaml: oneRegion + "gatway: {slots_per_worker: 3}\n",
			want: []string{"fleet file test.yaml", "[7:1]", `unknown field "gatway"`, ">  7 | gatway"},
		},
		{
			name: "unknown nested key", parse: true,
			yaml: oneRegion + "gateway:\n  slots_per_worker: 3\n  max_concurency: 10\n",
			want: []string{"[9:3]", `unknown field "max_concurency"`, ">  9 |   max_concurency: 10"},
		},
		{
			name: "unknown key in a backend", parse: true,
			yaml: "regions:\n  - name: a\n    backends:\n      - {name: a-0, gpu: 2}\n",
			want: []string{"[4:21]", `unknown field "gpu"`},
		},
		{
			name: "unknown key in a profile", parse: true,
			yaml: "profiles:\n  big: {base_ms: 1, kv_token: 5}\n" + oneRegion,
			want: []string{"[2:21]", `unknown field "kv_token"`},
		},
		{
			name: "wrong type", parse: true,
			yaml: "regions:\n  - name: a\n    routers: 1\n    backends:\n      - {name: a-0, gpus: many}\n",
			want: []string{"[5:27]", "cannot unmarshal string", "of type int", "gpus: many"},
		},
		{
			name: "duration without a unit", parse: true,
			yaml: oneRegion + "client:\n  ttft_slo: 10\n",
			want: []string{"[8:13]", "cannot unmarshal", "time.Duration"},
		},
		{
			// goccy passes time.ParseDuration's error on without a position.
			name: "malformed duration", parse: true,
			yaml: oneRegion + "policy:\n  max_wait: 4 seconds\n",
			want: []string{"fleet file test.yaml", `unknown unit " seconds" in duration "4 seconds"`},
		},
		{
			name: "regions not a list", parse: true,
			yaml: "regions: 3\n",
			want: []string{"[1:10]", "sequence is expected"},
		},
		{
			name: "not a mapping", parse: true,
			yaml: "- 1\n- 2\n",
			want: []string{"[1:1]", "mapping is expected"},
		},
		{
			name: "bad YAML syntax", parse: true,
			yaml: "regions:\n  - name: a\n   routers: [1\n",
			want: []string{"fleet file test.yaml", "[3:"},
		},
		{
			// goccy/go-yaml v1.19.2 panics here (goccy/go-yaml#735); Parse
			// must return an error instead.
			name: "tag where a list is expected", parse: true,
			yaml: "regions: !!seq\n",
			want: []string{"fleet file test.yaml", "the YAML decoder failed on this input"},
		},
		{
			name: "tag on a scalar where a list is expected", parse: true,
			yaml: "regions:\n  - name: a\n    backends: ! 0\n",
			want: []string{"the YAML decoder failed on this input"},
		},
		{
			name: "two documents", parse: true,
			yaml: oneRegion + "---\n" + oneRegion,
			want: []string{"more than one YAML document"},
		},
		{
			name: "empty file", parse: true,
			yaml: "",
			want: []string{"fleet file test.yaml is empty"},
		},
		{
			name: "only comments", parse: true,
			yaml: "# nothing here\n\n",
			want: []string{"fleet file test.yaml is empty"},
		},
		{
			name: "no regions",
			yaml: "engine: full\n",
			want: []string{"fleet test", "no regions", "no backends"},
		},
		{
			name: "negative gpus",
			yaml: strings.Replace(oneRegion, "gpus: 2", "gpus: -3", 1),
			want: []string{`backend "a-0": workers (GPUs) must be 1-4096, got -3`},
		},
		{
			name: "zero gpus",
			yaml: strings.Replace(oneRegion, "gpus: 2", "gpus: 0", 1),
			want: []string{`backend "a-0": workers (GPUs) must be 1-4096, got 0`},
		},
		{
			name: "negative routers",
			yaml: strings.Replace(oneRegion, "routers: 1", "routers: -1", 1),
			want: []string{`region "a": routers must be 0-1000, got -1`},
		},
		{
			name: "backend names an unknown profile",
			yaml: "profiles:\n  big: {base_ms: 1, kv_tokens: 5, max_seqs: 1}\n" +
				strings.Replace(oneRegion, "gpus: 2", "gpus: 2, profile: huge", 1),
			want: []string{`backend "a-0"`, `unknown profile "huge"`, "profiles in this file: [big]"},
		},
		{
			name: "unknown default engine",
			yaml: "engine: quarter\n" + oneRegion,
			want: []string{"engine:", `unknown profile "quarter"`},
		},
		{
			name: "unknown engine in the run",
			yaml: oneRegion,
			run:  &Run{Policy: "waw", RPS: 1, Measure: time.Second, Engine: "tiny"},
			want: []string{`unknown profile "tiny"`},
		},
		{
			name: "invalid custom profile",
			yaml: "profiles:\n  big: {base_ms: 1, kv_tokens: 5}\nengine: big\n" + oneRegion,
			want: []string{`backend "a-0"`, `engine profile "big"`, "max_seqs must be > 0, got 0"},
		},
		{
			name: "host tier without a load rate",
			yaml: "profiles:\n  big: {base_ms: 1, kv_tokens: 5000, max_seqs: 4, host_kv_tokens: 10000}\nengine: big\n" + oneRegion,
			want: []string{`engine profile "big"`, "host_kv_load_tokens_per_s must be >= 1 with a host tier (host_kv_tokens 10000), got 0"},
		},
		{
			name: "negative host tier",
			yaml: "profiles:\n  big: {base_ms: 1, kv_tokens: 5000, max_seqs: 4, host_kv_tokens: -1, host_kv_load_tokens_per_s: .nan}\nengine: big\n" + oneRegion,
			want: []string{"host_kv_tokens must be >= 0 (0: no host tier), got -1", "host_kv_load_tokens_per_s must be a finite number >= 0, got NaN"},
		},
		{
			name: "rtt_ms names an unknown region",
			yaml: strings.Replace(oneRegion, "rtt_ms: {a: 1}", "rtt_ms: {a: 1, zz: 40}", 1),
			want: []string{`region "a": rtt_ms names unknown region "zz"`},
		},
		{
			name: "missing rtt between two regions",
			yaml: twoRegions("{a: 1}", "{b: 1}"),
			want: []string{`region "a": no rtt_ms to "b" (give it in either region)`},
		},
		{
			name: "negative rtt",
			yaml: twoRegions("{a: 1, b: -5}", "{b: 1}"),
			want: []string{`region "a": rtt_ms to "b" must be a number of milliseconds >= 0`, "got -5"},
		},
		{
			name: "NaN rtt",
			yaml: twoRegions("{a: 1, b: .nan}", "{b: 1}"),
			want: []string{`region "a": rtt_ms to "b" must be a number of milliseconds >= 0`, "got NaN"},
		},
		{
			name: "infinite rtt",
			yaml: twoRegions("{a: 1}", "{b: 1, a: .inf}"),
			want: []string{`region "b": rtt_ms to "a" must be a number of milliseconds >= 0`, "got +Inf"},
		},
		{
			name: "rtt too large for a duration",
			yaml: twoRegions("{a: 1e300}", "{b: 1, a: 3}"),
			want: []string{`region "a": rtt_ms to "a" must be`, "got 1e+300"},
		},
		{
			name: "duplicate region",
			yaml: twoRegions("{a: 1}", "{b: 1, a: 3}") +
				"  - name: a\n    routers: 1\n    backends: [{name: a-9, gpus: 1}]\n",
			want: []string{`region "a" listed twice`},
		},
		{
			name: "duplicate backend name",
			yaml: strings.Replace(twoRegions("{a: 1}", "{b: 1, a: 3}"), "name: b-0", "name: a-0", 1),
			want: []string{`backend name "a-0" used twice`},
		},
		{
			name: "region without a name",
			yaml: "regions:\n  - routers: 1\n    backends: [{name: x, gpus: 1}]\n",
			want: []string{"region 1 has no name"},
		},
		{
			name: "backend without a name",
			yaml: strings.Replace(oneRegion, "{name: a-0, gpus: 2}", "{gpus: 2}", 1),
			want: []string{`region "a": backend 1 has no name`},
		},
		{
			name: "no routers anywhere",
			yaml: strings.Replace(oneRegion, "routers: 1", "routers: 0", 1),
			want: []string{"no routers in any region"},
		},
		{
			name: "invalid section value",
			yaml: oneRegion + "workload: {turns_min: 10, turns_max: 5}\n",
			want: []string{"workload: turns: want 1 <= min <= max, got min 10 max 5"},
		},
		{
			name: "unknown policy",
			yaml: oneRegion,
			run:  &Run{Policy: "wow", RPS: 1, Measure: time.Second},
			want: []string{`unknown policy "wow"`, "waw", "round-robin"},
		},
		{
			name: "unknown workload class",
			yaml: oneRegion,
			run:  &Run{Policy: "waw", RPS: 1, Measure: time.Second, Class: "chat"},
			want: []string{`unknown class "chat"`, "baseline_mixed"},
		},
		{
			name: "model listed twice",
			yaml: "regions:\n  - name: a\n    routers: 1\n    backends:\n      - {name: a-0, gpus: 1, models: [m1, m1]}\n",
			want: []string{`backend "a-0": model "m1"`, "listed twice"},
		},
		{
			name: "empty model",
			yaml: "regions:\n  - name: a\n    routers: 1\n    backends:\n      - {name: a-0, gpus: 1, models: [\"\"]}\n",
			want: []string{`backend "a-0": model ""`},
		},
		{
			name: "negative cool-down",
			yaml: oneRegion,
			run:  &Run{Policy: "waw", RPS: 1, Measure: time.Second, Cooldown: -time.Second},
			want: []string{"cooldown must be >= 0"},
		},
	}
	reg := policy.NewRegistry()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("test.yaml", []byte(tt.yaml))
			if tt.parse {
				if err == nil {
					t.Fatalf("Parse succeeded, want an error containing %q", tt.want)
				}
			} else {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				run := studyRun
				if tt.run != nil {
					run = *tt.run
				}
				_, err = f.SimConfig(run, reg)
				if err == nil {
					t.Fatalf("SimConfig succeeded, want an error containing %q", tt.want)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestMissingRTTOnce checks that a missing round trip is reported once per
// pair of regions, not once from each side.
func TestMissingRTTOnce(t *testing.T) {
	f, err := Parse("test.yaml", []byte(twoRegions("{a: 1}", "{b: 1}")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.SimConfig(studyRun, policy.NewRegistry())
	if err == nil {
		t.Fatal("SimConfig succeeded")
	}
	if n := strings.Count(err.Error(), "no rtt_ms"); n != 1 {
		t.Errorf("missing rtt reported %d times, want once:\n%v", n, err)
	}
}

func TestParseTooLarge(t *testing.T) {
	data := make([]byte, MaxFileBytes+1)
	_, err := Parse("big.yaml", data)
	if err == nil || !strings.Contains(err.Error(), "larger than the 4194304-byte limit") {
		t.Fatalf("Parse of %d bytes: %v", len(data), err)
	}
	// A comment as long as the limit allows is still read.
	data = append([]byte("#"), make([]byte, MaxFileBytes-1)...)
	for i := 1; i < len(data); i++ {
		data[i] = 'x'
	}
	if _, err := Parse("big.yaml", data); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("Parse of a %d-byte comment: %v, want the empty-file error", len(data), err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	// The file is larger than the limit; Load must say so (and read only the
	// limit, which this test cannot see, but the message's size shows).
	if err := os.WriteFile(big, append([]byte(oneRegion), make([]byte, MaxFileBytes)...), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(oneRegion+"routerz: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       []string
	}{
		{"too large", big, []string{big, "larger than the 4194304-byte limit"}},
		{"empty", empty, []string{empty, "is empty"}},
		{"unknown key", bad, []string{bad, "[7:1]", `unknown field "routerz"`}},
		{"not a preset nor a file", "heterogeneous", []string{`fleet "heterogeneous" is neither a built-in fleet (hetero, homo, small, three-site) nor a file`}},
		{"missing file in a directory", filepath.Join(dir, "nope.yaml"), []string{"nope.yaml", "hetero, homo"}},
		{"directory", dir, []string{"reading fleet file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Load(tt.path)
			if err == nil {
				t.Fatalf("Load(%s) = %+v, want an error", tt.path, f)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestLoadPreset(t *testing.T) {
	for _, name := range PresetNames() {
		f, err := Load(name)
		if err != nil {
			t.Fatalf("Load(%q): %v", name, err)
		}
		p, _ := Preset(name)
		if !reflect.DeepEqual(f, p) {
			t.Errorf("Load(%q) differs from Preset(%q)", name, name)
		}
	}
}

// TestCustomFleet loads testdata/two-regions.yaml: a custom profile, the
// default engine from the file, a round trip given one way only, and every
// omitted section at its default.
func TestCustomFleet(t *testing.T) {
	f, err := Load(filepath.Join("testdata", "two-regions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "two-regions" {
		t.Errorf("name %q, want the file's base name two-regions", f.Name)
	}
	cfg, err := f.SimConfig(studyRun, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}

	big := engine.Profile{Name: "big", BaseMs: 3, PerDecodeSeqMs: 0.05, PerPrefillTokenMs: 0.04,
		KVTokens: 2_000_000, MaxSeqs: 40, PrefillChunk: 4096}
	type backend struct {
		name            string
		region, workers int
		profile         engine.Profile
	}
	want := []backend{{"w0", 0, 3, big}, {"w1", 0, 1, engine.FullProfile()}, {"e0", 1, 5, engine.FullProfile()}}
	if len(cfg.Backends) != len(want) {
		t.Fatalf("%d backends, want %d", len(cfg.Backends), len(want))
	}
	for i, w := range want {
		b := cfg.Backends[i]
		if b.Name != w.name || b.Region != w.region || b.Workers != w.workers || b.Profile != w.profile {
			t.Errorf("backend %d = %+v, want %+v", i, b, w)
		}
	}

	if len(cfg.Regions) != 2 || cfg.Regions[0].Name != "west" || cfg.Regions[0].Routers != 2 ||
		cfg.Regions[1].Name != "east" || cfg.Regions[1].Routers != 1 {
		t.Errorf("regions %+v", cfg.Regions)
	}
	wantLat := [][]time.Duration{
		{1 * time.Millisecond, 40 * time.Millisecond},
		{40 * time.Millisecond, 500 * time.Microsecond}, // east -> west from west's rtt_ms
	}
	if !reflect.DeepEqual(cfg.Latency, wantLat) {
		t.Errorf("latency %v, want %v", cfg.Latency, wantLat)
	}

	// Omitted sections take their defaults.
	if cfg.ClientLatency != time.Millisecond {
		t.Errorf("client latency %v, want 1ms", cfg.ClientLatency)
	}
	if cfg.Gateway != gateway.DefaultConfig() {
		t.Errorf("gateway %+v, want the default %+v", cfg.Gateway, gateway.DefaultConfig())
	}
	if cfg.Params != policy.DefaultParams() {
		t.Errorf("policy params %+v, want the default %+v", cfg.Params, policy.DefaultParams())
	}
	if cfg.Workload != workload.DefaultConfig() {
		t.Errorf("workload %+v, want the default %+v", cfg.Workload, workload.DefaultConfig())
	}
	if cfg.Client != client.DefaultConfig() {
		t.Errorf("client %+v, want the default %+v", cfg.Client, client.DefaultConfig())
	}
	// Run parameters come from the run.
	if cfg.Policy != "waw" || cfg.RPS != 450 || cfg.Seed != 1 || cfg.Warmup != 240*time.Second || cfg.Measure != 240*time.Second {
		t.Errorf("run parameters %q %v %v %v %v", cfg.Policy, cfg.RPS, cfg.Seed, cfg.Warmup, cfg.Measure)
	}

	// Run.Engine replaces the file's default engine, not a backend's own profile.
	run := studyRun
	run.Engine = "half"
	cfg, err = f.SimConfig(run, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{cfg.Backends[0].Profile.Name, cfg.Backends[1].Profile.Name, cfg.Backends[2].Profile.Name}; !reflect.DeepEqual(got, []string{"big", "half", "half"}) {
		t.Errorf("with run engine half, profiles %v, want [big half half]", got)
	}
}

// TestPartialSections checks that a section given in part keeps the defaults
// of the keys it leaves out, and that an explicit name wins over the file's.
func TestPartialSections(t *testing.T) {
	f, err := Parse("dir/some.yml", []byte("name: custom\nclient_latency: 3ms\n"+oneRegion+
		"gateway: {max_concurrency: 10}\nworkload:\n  turns_max: 20\nclient: {max_attempts: 1}\npolicy: {weight: max-input-tps}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "custom" {
		t.Errorf("name %q, want custom", f.Name)
	}
	cfg, err := f.SimConfig(studyRun, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	g := gateway.DefaultConfig()
	g.MaxConcurrency = 10
	w := workload.DefaultConfig()
	w.TurnsMax = 20
	c := client.DefaultConfig()
	c.MaxAttempts = 1
	p := policy.DefaultParams()
	p.Weight = policy.WeightMaxInputTPS
	if cfg.Gateway != g || cfg.Workload != w || cfg.Client != c || cfg.Params != p || cfg.ClientLatency != 3*time.Millisecond {
		t.Errorf("got gateway %+v workload %+v client %+v params %+v client latency %v", cfg.Gateway, cfg.Workload, cfg.Client, cfg.Params, cfg.ClientLatency)
	}

	f, err = Parse(`C:\fleets\other.yml`, []byte(oneRegion))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "other" {
		t.Errorf("name %q, want other", f.Name)
	}
}

// A backend's models reach the simulator's backend; a backend without
// models: takes every model.
func TestFleetModels(t *testing.T) {
	f, err := Parse("test.yaml", []byte("regions:\n  - name: a\n    routers: 1\n    backends:\n      - {name: a-0, gpus: 1, models: [llama-8b, llama-8b-sql-lora]}\n      - {name: a-1, gpus: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.SimConfig(studyRun, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Backends[0].Models; !reflect.DeepEqual(got, []string{"llama-8b", "llama-8b-sql-lora"}) {
		t.Errorf("a-0's models %v", got)
	}
	if got := cfg.Backends[1].Models; got != nil {
		t.Errorf("a-1's models %v, want none", got)
	}
}
