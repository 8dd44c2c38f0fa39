package xds

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	_ "google.golang.org/grpc/xds" // the xds:/// resolver and the xDS balancers
)

// The consumer test runs gRPC's own xDS client against the Server. gRPC reads
// its bootstrap from GRPC_XDS_BOOTSTRAP_CONFIG once per process, when the
// package loads, so the test runs itself again in a child process with that
// variable set to point at a listening socket the parent opened and hands
// over as file descriptor 3.
const consumerChildEnv = "STARGATE_XDS_CONSUMER_CHILD"

func TestGRPCConsumer(t *testing.T) {
	if os.Getenv(consumerChildEnv) == "1" {
		runConsumer(t)
		return
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := lis.(*net.TCPListener).File()
	_ = lis.Close() // f is a duplicate of the listening socket
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "stargate-consumer-test", "locality": {"region": "test"}}
}`, lis.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGRPCConsumer$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), consumerChildEnv+"=1", "GRPC_XDS_BOOTSTRAP_CONFIG="+bootstrap)
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestGRPCConsumer") {
		t.Fatalf("consumer test (child process) failed: %v\n%s", err, out)
	}
	t.Logf("child process:\n%s", out)
}

// backend is a gRPC test server: the health service on a loopback port.
type backend struct {
	id   string
	port uint32
	srv  *grpc.Server
}

func startBackends(t *testing.T, ids ...string) []backend {
	t.Helper()
	var out []backend
	for _, id := range ids {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		healthpb.RegisterHealthServer(s, health.NewServer())
		go func() { _ = s.Serve(lis) }()
		t.Cleanup(s.Stop)
		out = append(out, backend{id: id, port: uint32(lis.Addr().(*net.TCPAddr).Port), srv: s})
	}
	return out
}

// calls makes one Check per key, with the key as the session header, and
// counts the calls each backend (by port) served.
func calls(ctx context.Context, c healthpb.HealthClient, header string, keys []string) (map[uint32]int, error) {
	const workers = 8
	var mu sync.Mutex
	counts := map[uint32]int{}
	var firstErr error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(keys); i += workers {
				var p peer.Peer
				cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, header, keys[i]), 10*time.Second)
				_, err := c.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
				cancel()
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
				} else {
					counts[uint32(p.Addr.(*net.TCPAddr).Port)]++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return counts, firstErr
}

func randomKeys(r *rand.Rand, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.FormatUint(r.Uint64(), 36)
	}
	return keys
}

// splitError compares counts with the shares of weights and returns a
// description of every backend whose share is off by more than z standard
// deviations. The deviation adds the binomial spread of n calls and the
// spread of a ring of ringSize random points (a backend holding a share p of
// the points owns a Beta-distributed arc of the ring, variance
// p(1-p)/(ringSize+1)).
func splitError(bs []backend, eps []Endpoint, counts map[uint32]int, z float64, ringSize int) string {
	var total float64
	for _, e := range eps {
		if e.Health == Healthy {
			total += float64(max(e.Weight, 1))
		}
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	var bad []string
	for i, b := range bs {
		e := eps[i]
		got := float64(counts[b.port]) / float64(n)
		if e.Health != Healthy {
			if counts[b.port] != 0 {
				bad = append(bad, fmt.Sprintf("%s (%v) got %d calls", b.id, e.Health, counts[b.port]))
			}
			continue
		}
		p := float64(max(e.Weight, 1)) / total
		sigma := math.Sqrt(p * (1 - p) * (1/float64(n) + 1/float64(ringSize+1)))
		if math.Abs(got-p) > z*sigma {
			bad = append(bad, fmt.Sprintf("%s share %.4f, want %.4f +- %.4f", b.id, got, p, z*sigma))
		}
	}
	return strings.Join(bad, "; ")
}

func runConsumer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lis, err := net.FileListener(os.NewFile(3, "xds"))
	if err != nil {
		t.Fatalf("the parent's listener (fd 3): %v", err)
	}
	s, err := NewServer(Options{
		Threshold: -1, // every weight change is pushed
		Window:    10 * time.Millisecond,
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopServer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.Serve(sctx, lis) }()
	defer func() {
		stopServer()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	bs := startBackends(t, "a", "b", "c")
	endpoints := func(weights []uint32, health []Health) []Endpoint {
		var out []Endpoint
		for i, b := range bs {
			out = append(out, Endpoint{ID: b.id, Region: "test", Host: "127.0.0.1", Port: b.port, Weight: weights[i], Health: health[i]})
		}
		return out
	}

	conn, err := grpc.NewClient("xds:///stargate", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := healthpb.NewHealthClient(conn)
	header := s.opts.HashHeader
	r := rand.New(rand.NewPCG(1, 2))
	probe := randomKeys(r, 400)
	start := time.Now()
	const n, z, ringSize = 4000, 4.5, 4096

	// converge waits until a probe batch splits as eps say, loosely: the
	// client applies a pushed snapshot a moment after it acknowledges it.
	converge := func(eps []Endpoint) {
		t.Helper()
		for {
			counts, err := calls(ctx, client, header, probe)
			if err == nil && splitError(bs, eps, counts, 6, ringSize) == "" {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the client never followed %+v (last split %v, err %v)", eps, counts, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	measure := func(name string, eps []Endpoint) map[uint32]int {
		t.Helper()
		counts, err := calls(ctx, client, header, randomKeys(r, n))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if msg := splitError(bs, eps, counts, z, ringSize); msg != "" {
			t.Errorf("%s: %s (counts by port %v)", name, msg, counts)
		}
		t.Logf("%s (%.1fs): weights %v -> calls a %d, b %d, c %d", name, time.Since(start).Seconds(), weightsOf(eps), counts[bs[0].port], counts[bs[1].port], counts[bs[2].port])
		return counts
	}
	all := []Health{Healthy, Healthy, Healthy}

	first := endpoints([]uint32{1, 2, 5}, all)
	s.Update(first)
	converge(first)
	measure("weights 1:2:5", first)

	moved := endpoints([]uint32{5, 2, 1}, all)
	s.Update(moved)
	converge(moved)
	measure("weights moved to 5:2:1", moved)

	// A zero weight is exported as 1, never as "no traffic".
	zero := endpoints([]uint32{0, 1, 2}, all)
	s.Update(zero)
	converge(zero)
	measure("weights 0(=1):1:2", zero)

	down := endpoints([]uint32{5, 2, 1}, []Health{Healthy, Healthy, Unhealthy})
	s.Update(down)
	converge(down)
	if counts := measure("c unhealthy", down); counts[bs[2].port] != 0 {
		t.Errorf("unhealthy c got %d calls", counts[bs[2].port])
	}

	drain := endpoints([]uint32{5, 2, 1}, []Health{Draining, Healthy, Healthy})
	s.Update(drain)
	converge(drain)
	if counts := measure("a draining", drain); counts[bs[0].port] != 0 {
		t.Errorf("draining a got %d calls", counts[bs[0].port])
	}

	// The control plane goes away: the client keeps the last configuration.
	stopServer()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	served <- nil // for the deferred stop
	measure("control plane gone", drain)
}

func weightsOf(eps []Endpoint) []string {
	var out []string
	for _, e := range eps {
		w := strconv.FormatUint(uint64(e.Weight), 10)
		if e.Health != Healthy {
			w += "(" + e.Health.String() + ")"
		}
		out = append(out, w)
	}
	return out
}
