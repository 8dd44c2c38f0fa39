package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stargate-llm/stargate/policy"
)

// FuzzParse checks that no fleet file makes Parse or SimConfig panic, and that
// every sim.Config SimConfig returns without an error passes Validate.
func FuzzParse(f *testing.F) {
	for _, name := range PresetNames() {
		data, err := os.ReadFile(filepath.Join("..", "examples", name+".yaml"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	if data, err := os.ReadFile(filepath.Join("testdata", "two-regions.yaml")); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"regions: []\n",
		"regions:\n  - null\n",
		oneRegion,
		oneRegion + "---\n" + oneRegion,
		twoRegions("{a: 1}", "{b: 1}"),
		twoRegions("{a: 1, b: .nan}", "{b: -1e400}"),
		"regions:\n  - name: a\n    backends:\n      - {name: a-0, gpus: many}\n",
		"gateway:\n  max_concurency: 3\n",
		"profiles: {x: {base_ms: .nan}}\nengine: x\n" + oneRegion,
		"a: &a [*a]\n",
		"regions: &r\n  - name: a\n    rtt_ms: *r\n",
		"- [\n",
		"{",
		"regions:\n  - name: a\n   routers: [1\n",
		"regions:\n  - name: a\n    routers: 1\n    backends:\n      - {name: \"g-{i}\", gpus: 2, count: 4}\n",
		"regions:\n  - name: a\n    backends:\n      - {name: g, gpus: 2, count: -1}\n",
	} {
		f.Add([]byte(s))
	}
	reg := policy.NewRegistry()
	f.Fuzz(func(t *testing.T, data []byte) {
		fleet, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		cfg, err := fleet.SimConfig(studyRun, reg)
		if err != nil {
			return
		}
		if err := cfg.Validate(reg); err != nil {
			t.Fatalf("SimConfig returned a config that fails Validate: %v", err)
		}
	})
}
