package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/policy"
)

func TestExpandGroups(t *testing.T) {
	region := func(backends string) string {
		return "regions:\n  - name: a\n    routers: 1\n    rtt_ms: {a: 1}\n    backends:\n" + backends
	}
	tests := []struct {
		name    string
		yaml    string
		want    []string // expanded names, in order
		gpus    []int
		profile []string
		errs    []string // substrings of Parse's error; empty when it must succeed
	}{
		{
			name: "group between single backends",
			yaml: region("      - {name: first, gpus: 1}\n      - {name: \"g-{i}\", gpus: 8, count: 3, profile: full}\n      - {name: last, gpus: 2}\n"),
			want: []string{"first", "g-0", "g-1", "g-2", "last"}, gpus: []int{1, 8, 8, 8, 2},
			profile: []string{"", "full", "full", "full", ""},
		},
		{
			name: "count of one",
			yaml: region("      - {name: \"solo-{i}\", gpus: 4, count: 1}\n"),
			want: []string{"solo-0"}, gpus: []int{4}, profile: []string{""},
		},
		{
			name: "index anywhere, more than once",
			yaml: region("      - {name: \"r{i}-b{i}\", gpus: 2, count: 2}\n"),
			want: []string{"r0-b0", "r1-b1"}, gpus: []int{2, 2}, profile: []string{"", ""},
		},
		{
			name: "block style",
			yaml: region("      - name: big-{i}\n        gpus: 16\n        count: 2\n"),
			want: []string{"big-0", "big-1"}, gpus: []int{16, 16}, profile: []string{"", ""},
		},
		{
			name: "group without index",
			yaml: region("      - {name: g, gpus: 8, count: 3}\n"),
			errs: []string{`region "a": backend entry 1 ("g")`, "a group of 3 needs {i} in its name", `"g-{i}"`},
		},
		{
			name: "index without count",
			yaml: region("      - {name: \"g-{i}\", gpus: 8}\n"),
			errs: []string{`backend entry 1 ("g-{i}")`, "{i} in a name needs a count"},
		},
		{
			name: "negative count",
			yaml: region("      - {name: \"g-{i}\", gpus: 8, count: -2}\n"),
			errs: []string{"count must be >= 1, got -2"},
		},
		{
			name: "too many backends",
			yaml: region(fmt.Sprintf("      - {name: \"g-{i}\", gpus: 1, count: %d}\n      - {name: \"h-{i}\", gpus: 1, count: 5}\n", MaxBackends-2)),
			errs: []string{`backend entry 2 ("h-{i}")`, fmt.Sprintf("more than %d backends", MaxBackends)},
		},
		{
			name: "count not a number",
			yaml: region("      - {name: \"g-{i}\", gpus: 8, count: lots}\n"),
			errs: []string{"[6:", "cannot unmarshal string"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("test.yaml", []byte(tt.yaml))
			if len(tt.errs) > 0 {
				if err == nil {
					t.Fatalf("Parse succeeded; want an error with %q", tt.errs)
				}
				for _, w := range tt.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names, profiles []string
			var gpus []int
			for _, b := range f.Regions[0].Backends {
				names, gpus, profiles = append(names, b.Name), append(gpus, b.GPUs), append(profiles, b.Profile)
				if b.Count != 0 {
					t.Errorf("backend %s kept count %d after expansion", b.Name, b.Count)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.want) || fmt.Sprint(gpus) != fmt.Sprint(tt.gpus) || fmt.Sprint(profiles) != fmt.Sprint(tt.profile) {
				t.Errorf("expanded to %v %v %v, want %v %v %v", names, gpus, profiles, tt.want, tt.gpus, tt.profile)
			}
		})
	}
}

// TestGroupsDuplicateNames: two groups that expand to the same name are
// caught where single backends are, by name.
func TestGroupsDuplicateNames(t *testing.T) {
	f, err := Parse("test.yaml", []byte("regions:\n  - name: a\n    routers: 1\n    rtt_ms: {a: 1}\n    backends:\n"+
		"      - {name: \"g-{i}\", gpus: 1, count: 3}\n      - {name: g-2, gpus: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.SimConfig(studyRun, policy.NewRegistry())
	if err == nil || !strings.Contains(err.Error(), `backend name "g-2" used twice`) {
		t.Fatalf("SimConfig error %v, want the duplicate name g-2", err)
	}
}

// TestScaledExamples: examples/hetero-Nx.yaml is the hetero fleet with every
// backend copied N times, in the same regions, in order.
func TestScaledExamples(t *testing.T) {
	base, _ := Preset("hetero")
	reg := policy.NewRegistry()
	for _, n := range []int{10, 100} {
		t.Run(fmt.Sprintf("%dx", n), func(t *testing.T) {
			f, err := Load(filepath.Join("..", "examples", fmt.Sprintf("hetero-%dx.yaml", n)))
			if err != nil {
				t.Fatal(err)
			}
			run := studyRun
			run.RPS *= float64(n)
			cfg, err := f.SimConfig(run, reg)
			if err != nil {
				t.Fatal(err)
			}
			gpus := 0
			for _, b := range cfg.Backends {
				gpus += b.Workers
			}
			if len(cfg.Backends) != 20*n || gpus != 220*n {
				t.Fatalf("%d backends, %d GPUs; want %d and %d", len(cfg.Backends), gpus, 20*n, 220*n)
			}
			if len(f.Regions) != len(base.Regions) {
				t.Fatalf("%d regions, want %d", len(f.Regions), len(base.Regions))
			}
			for ri, r := range f.Regions {
				b0 := base.Regions[ri]
				if r.Name != b0.Name || r.Routers != b0.Routers || fmt.Sprint(r.RTTms) != fmt.Sprint(b0.RTTms) {
					t.Errorf("region %d: %s %d %v, want %s %d %v", ri, r.Name, r.Routers, r.RTTms, b0.Name, b0.Routers, b0.RTTms)
				}
				for k, b := range r.Backends {
					orig := b0.Backends[k/n]
					if want := fmt.Sprintf("%s-%d", orig.Name, k%n); b.Name != want || b.GPUs != orig.GPUs {
						t.Fatalf("region %s backend %d: %s with %d GPUs, want %s with %d", r.Name, k, b.Name, b.GPUs, want, orig.GPUs)
					}
				}
			}
		})
	}
}

// FuzzExpandGroups: any group expands to exactly count backends, named by the
// pattern with 0..count-1, all distinct when the pattern holds {i}; the same
// input always expands the same way.
func FuzzExpandGroups(f *testing.F) {
	f.Add("g-{i}", 3, 8)
	f.Add("{i}", 1, 1)
	f.Add("x", 2, 1)
	f.Add("a{i}b{i}", 12, 4)
	f.Add("", 0, 0)
	f.Fuzz(func(t *testing.T, name string, count, gpus int) {
		count %= 2000 // bounded work per input
		mk := func() *Fleet {
			return &Fleet{Regions: []RegionSpec{{Name: "a", Backends: []BackendFileSpec{{Name: name, GPUs: gpus, Count: count}}}}}
		}
		fl := mk()
		err := fl.ExpandGroups()
		again := mk()
		err2 := again.ExpandGroups()
		if (err == nil) != (err2 == nil) || fmt.Sprint(fl.Regions) != fmt.Sprint(again.Regions) {
			t.Fatalf("two expansions differ: %v / %v", err, err2)
		}
		if err != nil {
			return
		}
		got := fl.Regions[0].Backends
		if count == 0 {
			if len(got) != 1 || got[0].Name != name {
				t.Fatalf("a single backend changed: %+v", got)
			}
			return
		}
		if len(got) != count {
			t.Fatalf("count %d expanded to %d backends", count, len(got))
		}
		seen := make(map[string]bool, count)
		for i, b := range got {
			if b.GPUs != gpus || b.Count != 0 || seen[b.Name] {
				t.Fatalf("backend %d: %+v (seen before: %v)", i, b, seen[b.Name])
			}
			seen[b.Name] = true
		}
	})
}

// TestGroupsKeepModels: every backend a group expands to serves the group's
// models, each with its own copy of the list.
func TestGroupsKeepModels(t *testing.T) {
	yaml := "regions:\n  - name: a\n    routers: 1\n    rtt_ms: {a: 1}\n    backends:\n" +
		"      - {name: \"g-{i}\", gpus: 8, count: 2, models: [m1, m2]}\n"
	f, err := Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	bs := f.Regions[0].Backends
	if len(bs) != 2 {
		t.Fatalf("%d backends, want 2", len(bs))
	}
	for _, b := range bs {
		if fmt.Sprint(b.Models) != "[m1 m2]" {
			t.Errorf("backend %s serves %v, want [m1 m2]", b.Name, b.Models)
		}
	}
	bs[0].Models[0] = "changed"
	if bs[1].Models[0] != "m1" {
		t.Error("the group's backends share one models list")
	}
}
