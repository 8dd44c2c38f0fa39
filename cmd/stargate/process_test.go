package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/internal/slowtest"
)

// asCLI tells the test binary to act as the stargate command.
const asCLI = "STARGATE_TEST_AS_CLI"

// process is a stargate service started as its own OS process.
type process struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

// startProcess runs `stargate args...` as a child process and returns once it
// prints the URL it serves on.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCLI+"=1")
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() {
			if first {
				lines <- sc.Text()
				first = false
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case line := <-lines:
		i := strings.Index(line, "http://")
		if i < 0 {
			t.Fatalf("%v printed %q, not a URL", args, line)
		}
		p.url = strings.Fields(line[i:])[0]
	case <-p.done:
		t.Fatalf("%v exited before serving", args)
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not start within 30 s", args)
	}
	return p
}

// TestKillGatewayUnderLoad runs two engines, two gateways and a router as
// separate processes, kills one gateway while requests stream through it,
// and checks that nothing hangs, the router stops sending there, and every
// request the router accepted ends accounted for.
func TestKillGatewayUnderLoad(t *testing.T) {
	slowtest.Skip(t, "starts five processes")
	keyFile := writeKeyFile(t)
	rt := startProcess(t, "router", "--listen", "127.0.0.1:0", "--expose-backend", "--policy", "least-request", "--hmac-key-file", keyFile)
	var gws []*process
	for i := range 2 {
		eng := startProcess(t, "engine", "--listen", "127.0.0.1:0", "--gpus", "1", "--hmac-key-file", keyFile)
		gws = append(gws, startProcess(t, "gateway", "--listen", "127.0.0.1:0", "--engine", eng.url,
			"--router", rt.url, "--id", fmt.Sprintf("gw-%d", i), "--hmac-key-file", keyFile))
	}
	poll.Until(t, 10*time.Second, "both gateways registered", func() bool { return countState(t, rt.url, "ready") == 2 })

	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	outcomes := map[string]int{}
	servedAfter := map[string]int{} // backend -> requests served after the kill was detected
	var detected time.Time
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				sent := time.Now()
				backend, outcome := streamOnce(rt.url, fmt.Sprintf("c%d-%d", c, i))
				mu.Lock()
				outcomes[outcome]++
				if !detected.IsZero() && sent.After(detected) && outcome == "ok" {
					servedAfter[backend]++
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	if err := gws[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	poll.Until(t, 5*time.Second, "the router to fail gw-1", func() bool { return countState(t, rt.url, "failed") == 1 })
	mu.Lock()
	detected = time.Now()
	mu.Unlock()
	t.Logf("gw-1 failed %v after the kill", detected.Sub(killed).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	stop()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("clients still hang 30 s after the load stopped")
	}
	mu.Lock()
	defer mu.Unlock()
	if servedAfter["gw-1"] != 0 || servedAfter["gw-0"] == 0 {
		t.Errorf("after detection: %v; want everything on gw-0", servedAfter)
	}
	if outcomes["ok"] < 20 {
		t.Errorf("outcomes %v: too few completed", outcomes)
	}
	// Every request the router accepted ended as exactly one of completed,
	// failed or rejected.
	poll.Until(t, 5*time.Second, "the router's accounting to close", func() bool {
		accepted, ended := routerAccounting(t, rt.url)
		return accepted > 0 && accepted == ended
	})
	t.Logf("client outcomes %v", outcomes)
}

// streamOnce sends one streaming request and reads it to the end.
func streamOnce(url, session string) (backend, outcome string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := `{"stream":true,"max_tokens":40,"messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("X-Session-ID", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", "hung"
		}
		return "", "transport_error"
	}
	defer resp.Body.Close()
	backend = resp.Header.Get("X-Stargate-Backend")
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return backend, fmt.Sprintf("status_%d", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	switch {
	case ctx.Err() != nil:
		return backend, "hung"
	case err != nil:
		return backend, "cut"
	case bytes.Contains(b, []byte(`data: {"error"`)):
		return backend, "stream_error"
	case bytes.HasSuffix(b, []byte("data: [DONE]\n\n")):
		return backend, "ok"
	}
	return backend, "truncated"
}

func countState(t *testing.T, url, state string) int {
	t.Helper()
	resp, err := http.Get(url + "/v1/stargate/backends")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var v struct {
		Backends []struct{ State string } `json:"backends"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("backends: %v", err)
	}
	n := 0
	for _, b := range v.Backends {
		if b.State == state {
			n++
		}
	}
	return n
}

// routerAccounting reads stargate_router_accepted_total and the sum of
// stargate_router_requests_total from the router's /metrics.
func routerAccounting(t *testing.T, url string) (accepted, ended float64) {
	t.Helper()
	return metricSum(t, url, "stargate_router_accepted_total", nil), metricSum(t, url, "stargate_router_requests_total", nil)
}

// writeKeyFile writes the HMAC key the processes of a test share.
func writeKeyFile(t *testing.T) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "hmac.key")
	if err := os.WriteFile(keyFile, []byte("# role key-id secret (docs/security.md)\n"+
		"router r-1 0123456789abcdef0123456789abcdef\n"+
		"gateway g-1 1123456789abcdef0123456789abcdef\n"+
		"operator o-1 2123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile
}

// TestRouterRunsItsGateway runs a router with its backend's gateway in its
// own process (--gateway-engine) next to a second router that reaches the
// same gateway over --gateway-listen: both serve through it, the first by
// calling its handler directly (its health probes still reach it in memory,
// over HTTP/2), and the gateway books every request once.
func TestRouterRunsItsGateway(t *testing.T) {
	slowtest.Skip(t, "starts three processes")
	keyFile := writeKeyFile(t)
	eng := startProcess(t, "engine", "--listen", "127.0.0.1:0", "--gpus", "2", "--hmac-key-file", keyFile)
	other := startProcess(t, "router", "--listen", "127.0.0.1:0", "--expose-backend", "--hmac-key-file", keyFile)
	gwAddr := freeAddr(t)
	rt := startProcess(t, "router", "--listen", "127.0.0.1:0", "--expose-backend", "--hmac-key-file", keyFile,
		"--gateway-engine", eng.url, "--gateway-id", "box", "--gateway-listen", gwAddr, "--gateway-router", other.url, "--gateway-open-info")
	for _, r := range []*process{rt, other} {
		poll.Until(t, 10*time.Second, "the gateway registered at "+r.url, func() bool { return countState(t, r.url, "ready") == 1 })
	}
	const perRouter = 6
	for i := range perRouter {
		for _, r := range []*process{rt, other} {
			if backend, outcome := streamOnce(r.url, fmt.Sprintf("s%d", i)); backend != "box" || outcome != "ok" {
				t.Fatalf("request %d via %s: backend %q, outcome %q", i, r.url, backend, outcome)
			}
		}
	}
	if got := metricSum(t, rt.url, "stargate_router_http2_connections", nil); got != 1 {
		t.Errorf("router with the gateway: %v HTTP/2 connections, want 1 (its probes of its own gateway, in memory)", got)
	}
	if got := metricSum(t, other.url, "stargate_router_http2_connections", nil); got != 1 {
		t.Errorf("other router: %v HTTP/2 connections, want 1 (over --gateway-listen)", got)
	}
	completed := metricSum(t, "http://"+gwAddr, "stargate_gateway_requests_total", map[string]string{"outcome": "completed"})
	if completed != 2*perRouter {
		t.Errorf("gateway completed %v requests, want %d", completed, 2*perRouter)
	}
	for _, r := range []*process{rt, other} {
		if accepted, ended := routerAccounting(t, r.url); accepted != perRouter || ended != perRouter {
			t.Errorf("router %s: accepted %v, ended %v; want %d each", r.url, accepted, ended, perRouter)
		}
	}

	// Without --gateway-listen the gateway has no socket at all: its
	// advertised host (the default, or one nothing resolves) exists only in
	// the router's memory, so a completed request proves the in-memory path.
	for _, extra := range [][]string{nil, {"--gateway-advertise", "http://box.invalid:9"}} {
		alone := startProcess(t, append([]string{"router", "--listen", "127.0.0.1:0", "--expose-backend", "--gateway-engine", eng.url}, extra...)...)
		poll.Until(t, 10*time.Second, "the in-process gateway registered", func() bool { return countState(t, alone.url, "ready") == 1 })
		if backend, outcome := streamOnce(alone.url, "alone"); backend != "local" || outcome != "ok" {
			t.Fatalf("via the router alone %v: backend %q, outcome %q", extra, backend, outcome)
		}
		// The gateway's metrics are on the router's /metrics.
		if got := metricSum(t, alone.url, "stargate_gateway_requests_total", map[string]string{"outcome": "completed"}); got != 1 {
			t.Errorf("router alone %v: stargate_gateway_requests_total completed %v, want 1", extra, got)
		}
	}
}

// metricSum adds up the samples of one metric family at url/metrics whose
// labels include want.
func metricSum(t *testing.T, url, name string, want map[string]string) float64 {
	t.Helper()
	return metricSumClient(t, http.DefaultClient, url, name, want)
}

// metricSumClient is metricSum fetched with client (TLS, for one).
func metricSumClient(t *testing.T, client *http.Client, url, name string, want map[string]string) float64 {
	t.Helper()
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
next:
	for _, m := range fams[name].GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue next
			}
		}
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// TestTerminateDrainsStreams: a router with its gateway in its process,
// told to stop while a stream flows, lets the stream finish whole (its last
// frames leave before the connection closes) and then exits.
func TestTerminateDrainsStreams(t *testing.T) {
	slowtest.Skip(t, "starts two processes")
	eng := startProcess(t, "engine", "--listen", "127.0.0.1:0", "--gpus", "1")
	rt := startProcess(t, "router", "--listen", "127.0.0.1:0", "--expose-backend", "--gateway-engine", eng.url)
	poll.Until(t, 10*time.Second, "the in-process gateway registered", func() bool { return countState(t, rt.url, "ready") == 1 })
	body := `{"stream":true,"max_tokens":150,"messages":[{"role":"user","content":"Hi."}]}`
	resp, err := http.Post(rt.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the stream has begun
		t.Fatal(err)
	}
	if err := rt.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil || bytes.Contains(rest, []byte(`"error"`)) || !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream after SIGTERM: %v, ends %q", err, rest[max(0, len(rest)-160):])
	}
	select {
	case <-rt.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the router did not exit within 10 s of SIGTERM")
	}
}
