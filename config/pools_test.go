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
		{"  - {name: short, max_tokens: 10, backends: [short-0]}\n  - {name: short, max_tokens: 20, backends: [long-0]}\n", "empty, repeated or reserved"},
		{"  - {name: a, max_tokens: 10, backends: [short-0]}\n  - {name: b, max_tokens: 20, backends: [short-0]}\n", "belongs to one pool"},
		{"  - {name: a, max_tokens: 10}\n", "list its backends"},
	} {
		if _, err := Parse("pooled.yaml", []byte(poolFleet+"pools:\n"+tc.pools)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pools\n%s: error %v, want one with %q", tc.pools, err, tc.want)
		}
	}
}

// TestParsePools: a router's --pools file is a pools section's list alone;
// every mistake is named, and backends are any gateway ids.
func TestParsePools(t *testing.T) {
	good := "- name: short\n  max_tokens: 6144\n  backends: [gw-a, gw-b]\n- name: long\n  max_tokens: 131072\n  models: [big]\n  backends: [gw-c]\n"
	pools, err := ParsePools("test", []byte(good))
	if err != nil || len(pools) != 2 || pools[1].Models[0] != "big" || len(pools[0].Backends) != 2 {
		t.Fatalf("ParsePools(good) = %+v, %v", pools, err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"no pools", "[]\n", "no pools"},
		{"unknown key", "- name: a\n  max_tokens: 1\n  backends: [x]\n  weight: 2\n", "weight"},
		{"no name", "- max_tokens: 1\n  backends: [x]\n", "empty, repeated or reserved"},
		{"repeated name", "- name: a\n  max_tokens: 1\n  backends: [x]\n- name: a\n  max_tokens: 2\n  backends: [y]\n", "empty, repeated or reserved"},
		{"max_tokens 0", "- name: a\n  max_tokens: 0\n  backends: [x]\n", "max_tokens must be >= 1"},
		{"reserved name", "- name: fallback\n  max_tokens: 1\n  backends: [x]\n", "reserved"},
		{"no backends", "- name: a\n  max_tokens: 1\n", "list its backends"},
		{"backend twice", "- name: a\n  max_tokens: 1\n  backends: [x]\n- name: b\n  max_tokens: 2\n  backends: [x]\n", "belongs to one pool"},
		{"not a list", "name: a\n", "test"},
	} {
		if _, err := ParsePools("test", []byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}
