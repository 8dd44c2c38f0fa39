package config

import (
	"strings"
	"testing"
)

const poolFleet = `
name: pooled
engine: half
regions:
  - name: local
    routers: 1
    backends:
      - {name: "short-{i}", gpus: 1, count: 2}
      - {name: long-0, gpus: 2}
`

func TestPoolsSection(t *testing.T) {
	f, err := Parse("pooled.yaml", []byte(poolFleet+`pools:
  - {name: short, max_tokens: 2048, backends: [short-0, short-1]}
  - {name: long, max_tokens: 131072, models: [llama-70b], backends: [long-0]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Pools) != 2 || f.Pools[0].MaxTokens != 2048 || len(f.Pools[0].Backends) != 2 || f.Pools[1].Models[0] != "llama-70b" {
		t.Fatalf("pools %+v", f.Pools)
	}
	for _, tc := range []struct{ pools, want string }{
		{"  - {name: short, max_tokens: 2048, backends: [short-0], weight: 2}\n", "weight"},
		{"  - {name: short, max_tokens: 2048, backends: [short-9]}\n", `backend "short-9" is not in the fleet`},
		{"  - {name: short, max_tokens: 0, backends: [short-0]}\n", "max_tokens must be >= 1"},
		{"  - {name: short, max_tokens: 10, backends: [short-0]}\n  - {name: short, max_tokens: 20, backends: [long-0]}\n", "empty or repeated"},
		{"  - {name: a, max_tokens: 10, backends: [short-0]}\n  - {name: b, max_tokens: 20, backends: [short-0]}\n", "belongs to one pool"},
		{"  - {name: a, max_tokens: 10}\n", "list its backends"},
	} {
		if _, err := Parse("pooled.yaml", []byte(poolFleet+"pools:\n"+tc.pools)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pools\n%s: error %v, want one with %q", tc.pools, err, tc.want)
		}
	}
}
