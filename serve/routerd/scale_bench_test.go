package routerd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/cputime"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
	"github.com/stargate-llm/stargate/telemetry"
)

// BenchmarkStatsMessage is one gateway's signed stats message handled by a
// live router replica (pulsar-waw, the default configuration) that already
// has 100 or 1,000 registered backends: the signature checked, the JSON
// decoded and checked, the backend looked up and the placement core
// updated, through the router's HTTP handler without a network. The
// messages are made and signed before the timed loop, as the gateways
// would; bench/router-scale.sh measures the same over loopback with the
// network, probes and xDS.
func BenchmarkStatsMessage(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("backends=%d", n), func(b *testing.B) {
			gw := auth.Key{ID: "gw-key", Role: auth.RoleGateway, Secret: []byte("gateway-secret-0123456789")}
			rt := auth.Key{ID: "rt-key", Role: auth.RoleRouter, Secret: []byte("router-secret-0123456789")}
			ring, err := auth.NewKeyring(gw, rt)
			if err != nil {
				b.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.Keys = ring
			s, err := New(cfg, policy.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			h := s.Handler()
			signers := make([]*auth.Signer, n)
			seqs := make([]uint64, n)
			sig := &telemetry.Signals{State: telemetry.Ready, Running: 4, QueueDepth: 1, TTFTP95: 180 * time.Millisecond, KVFill: 0.4,
				Hardware: true, GPUUtil: 0.8, MemUtil: 0.7, TempC: 61, SMClockMHz: 1800, MaxSMClockMHz: 1980, MaxModelLen: 32768}
			message := func(i int) *http.Request {
				seqs[i]++
				m := wire.Stats{Backend: fmt.Sprintf("gw-%04d", i), URL: fmt.Sprintf("http://10.0.%d.%d:9000", i/250, i%250), Region: fmt.Sprintf("region-%d", i%5),
					Seq: seqs[i], Models: []string{"model-a"}, MaxModelLen: 32768, OwnedBy: "vllm", Workers: 1, Capacity: 8, Active: int(seqs[i] % 8),
					InputTPS: 1500, MaxInputTPS: 9000, Received: 0, Interval: 500 * time.Millisecond, Signals: sig}
				body, err := json.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				req, err := signers[i].NewRequest(auth.Audience("router", cfg.ID), http.MethodPost, "http://router"+wire.PathStats, body)
				if err != nil {
					b.Fatal(err)
				}
				return req
			}
			send := func(req *http.Request) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("stats refused: %d %s", rec.Code, rec.Body)
				}
			}
			for i := range n {
				signers[i] = auth.NewSigner(gw, fmt.Sprintf("gw-%04d", i))
				send(message(i))
			}
			if got := len(s.Backends()); got != n {
				b.Fatalf("%d backends registered, want %d", got, n)
			}
			reqs := make([]*http.Request, b.N)
			for i := range reqs {
				reqs[i] = message(i % n)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cputime.Used()
			for i := range b.N {
				send(reqs[i])
			}
			b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
