package xds

import (
	"fmt"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"

	"github.com/stargate-llm/stargate/internal/cputime"
)

// scaleFleet is n endpoints in five regions, weights like a router's
// (capacities from 1 to 16 GPUs' worth), one in fifty draining.
func scaleFleet(n int) []Endpoint {
	regions := []string{"usw2", "use1", "euw1", "apse1", "apne1"}
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{ID: fmt.Sprintf("gw-%05d", i), Region: regions[i%len(regions)],
			Host: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 9000, Weight: uint32(25 * (1 + i%16))}
		if i%50 == 0 {
			eps[i].Health = Draining
		}
	}
	return eps
}

// BenchmarkPush is one xDS push at 100, 1,000 and 10,000 endpoints: the
// endpoints normalized, the load assignment built and validated, the
// snapshots of both client groups made consistent (what Server.flush does
// before handing them to the cache), and the load assignment marshalled as
// it goes on the wire. It reports the marshalled size of the load
// assignment (push-bytes) and of the whole snapshot a new client receives
// (snapshot-bytes), and the CPU per push.
func BenchmarkPush(b *testing.B) {
	o := Options{}.withDefaults()
	st, err := buildStatic(o, "s")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			eps := scaleFleet(n)
			var size, whole int
			b.ReportAllocs()
			cpu := cputime.Used()
			for i := 0; b.Loop(); i++ {
				norm, err := normalize(eps)
				if err != nil {
					b.Fatal(err)
				}
				snaps, err := buildSnapshots(st, o.ClusterName, fmt.Sprintf("v%d", i), norm)
				if err != nil {
					b.Fatal(err)
				}
				whole = 0
				for typ, r := range snaps[groupEnvoy].Resources {
					for _, res := range r.Items {
						m, err := proto.Marshal(res.Resource)
						if err != nil {
							b.Fatal(err)
						}
						whole += len(m)
						if typ == int(types.Endpoint) {
							size = len(m)
						}
					}
				}
			}
			b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(size), "push-bytes")
			b.ReportMetric(float64(whole), "snapshot-bytes")
			if size == 0 {
				b.Fatal("no load assignment marshalled")
			}
		})
	}
}
