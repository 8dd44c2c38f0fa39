package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
)

// studyRun is the routing study's run parameters at 450 req/s.
var studyRun = Run{Policy: "waw", RPS: 450, Seed: 1, Warmup: 240 * time.Second, Measure: 240 * time.Second}

// TestExamplesMatchPresets checks that examples/<preset>.yaml spells out
// exactly the built-in fleet of the same name.
func TestExamplesMatchPresets(t *testing.T) {
	reg := policy.NewRegistry()
	for _, name := range PresetNames() {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("..", "examples", name+".yaml")
			file, err := Load(path)
			if err != nil {
				t.Fatalf("Load(%s): %v", path, err)
			}
			preset, ok := Preset(name)
			if !ok {
				t.Fatalf("Preset(%q) not found", name)
			}
			if file.Name != preset.Name {
				t.Errorf("name: file %q, preset %q", file.Name, preset.Name)
			}
			got, err := file.SimConfig(studyRun, reg)
			if err != nil {
				t.Fatalf("%s: SimConfig: %v", path, err)
			}
			want, err := preset.SimConfig(studyRun, reg)
			if err != nil {
				t.Fatalf("preset %s: SimConfig: %v", name, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s and preset %s give different sim.Configs:\nfile:   %+v\npreset: %+v", path, name, got, want)
			}
			// The fleets themselves agree too (the file has no profiles, the
			// preset a nil map, which DeepEqual tells apart).
			if len(file.Profiles) != 0 {
				t.Errorf("%s: profiles %v, want none", path, file.Profiles)
			}
			file.Profiles = preset.Profiles
			if !reflect.DeepEqual(file, preset) {
				t.Errorf("%s and preset %s differ:\nfile:   %+v\npreset: %+v", path, name, *file, *preset)
			}
		})
	}
}

// TestPresetShape pins the built-in fleets to the routing study's numbers, so
// that a change to them shows up here and in the example files.
func TestPresetShape(t *testing.T) {
	reg := policy.NewRegistry()
	for _, name := range []string{"hetero", "homo"} {
		f, ok := Preset(name)
		if !ok {
			t.Fatalf("PresetNames lists %q, but Preset does not know it", name)
		}
		cfg, err := f.SimConfig(studyRun, reg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		gpus := 0
		for _, b := range cfg.Backends {
			gpus += b.Workers
			if b.Profile.Name != "half" {
				t.Errorf("%s: backend %s profile %q, want half", name, b.Name, b.Profile.Name)
			}
		}
		if len(cfg.Regions) != 5 || len(cfg.Backends) != 20 || gpus != 220 {
			t.Errorf("%s: %d regions, %d backends, %d GPUs; want 5, 20, 220", name, len(cfg.Regions), len(cfg.Backends), gpus)
		}
		if got, want := cfg.Latency[0][1], 32*time.Millisecond; got != want {
			t.Errorf("%s: usw2 -> ue1 one-way latency %v, want %v", name, got, want)
		}
	}
	small, _ := Preset("small")
	cfg, err := small.SimConfig(studyRun, reg)
	if err != nil || len(cfg.Backends) != 2 || cfg.Backends[0].Workers+cfg.Backends[1].Workers != 3 || cfg.Regions[0].Routers != 1 {
		t.Errorf("small: %+v, %v; want one router and backends of 1 and 2 GPUs", cfg.Backends, err)
	}
	if _, ok := Preset("nope"); ok {
		t.Error(`Preset("nope") found`)
	}
	// The SLO matrix's fleet: 4 + 3 + 2 one-GPU backends, the middle site on
	// the older (half) GPUs, two routers per site.
	f, _ := Preset("three-site")
	cfg, err = f.SimConfig(studyRun, reg)
	if err != nil {
		t.Fatal(err)
	}
	var profiles []string
	for _, b := range cfg.Backends {
		if b.Workers != 1 {
			t.Errorf("three-site: backend %s has %d GPUs, want 1", b.Name, b.Workers)
		}
		profiles = append(profiles, cfg.Regions[b.Region].Name+":"+b.Profile.Name)
	}
	want := "east:full east:full east:full east:full central:half central:half central:half west:full west:full"
	if got := strings.Join(profiles, " "); got != want {
		t.Errorf("three-site backends %s, want %s", got, want)
	}
	if cfg.Latency[0][2] != 12*time.Millisecond || cfg.Latency[2][1] != 7*time.Millisecond || cfg.Regions[1].Routers != 2 {
		t.Errorf("three-site: east->west %v, west->central %v one-way, %d routers in central", cfg.Latency[0][2], cfg.Latency[2][1], cfg.Regions[1].Routers)
	}
}

// TestExampleFilesLoad: every fleet file in examples/ loads and builds a
// simulation.
func TestExampleFilesLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("%d example files: %v", len(files), err)
	}
	for _, path := range files {
		f, err := Load(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if _, err := f.SimConfig(studyRun, policy.NewRegistry()); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		if want := strings.TrimSuffix(filepath.Base(path), ".yaml"); f.Name != want {
			t.Errorf("%s: name %q, want %q", path, f.Name, want)
		}
	}
}
