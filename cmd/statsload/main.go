package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stargate-llm/stargate/internal/cputime"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
	"github.com/stargate-llm/stargate/telemetry"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "statsload: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	router    string
	pid       int
	keyFile   string
	gateways  int
	interval  time.Duration
	warmup    time.Duration
	measure   time.Duration
	rps       float64
	capacity  int
	regions   int
	jsonOut   bool
	sessions  int
	clientMax int
	routerID  string
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("statsload", flag.ContinueOnError)
	fs.StringVar(&o.router, "router", "", "the router's base URL (http://127.0.0.1:PORT)")
	fs.StringVar(&o.routerID, "router-id", "router-1", "the router replica's --id: stats are signed for that replica alone")
	fs.IntVar(&o.pid, "router-pid", 0, "the router's process id, whose CPU and memory /proc shows")
	fs.StringVar(&o.keyFile, "hmac-key-file", "", "the fleet's HMAC key file (a gateway-role key signs the stats)")
	fs.IntVar(&o.gateways, "gateways", 1000, "gateways sending stats")
	fs.DurationVar(&o.interval, "interval", 500*time.Millisecond, "each gateway's stats interval")
	fs.DurationVar(&o.warmup, "warmup", 10*time.Second, "time before the measured window (every gateway registers)")
	fs.DurationVar(&o.measure, "measure", 30*time.Second, "measured window")
	fs.Float64Var(&o.rps, "rps", 20, "requests per second routed through the router meanwhile")
	fs.IntVar(&o.capacity, "capacity", 8, "each gateway's capacity")
	fs.IntVar(&o.regions, "regions", 5, "regions the gateways are spread over")
	fs.IntVar(&o.sessions, "sessions", 500, "distinct sessions of the routed requests")
	fs.IntVar(&o.clientMax, "max-in-flight", 64, "routed requests in flight at most")
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON object instead of text")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var errs []error
	if !strings.HasPrefix(o.router, "http://") {
		errs = append(errs, fmt.Errorf("--router %q: want http://HOST:PORT", o.router))
	}
	if o.pid <= 0 {
		errs = append(errs, errors.New("--router-pid: want the router's process id"))
	}
	if o.keyFile == "" {
		errs = append(errs, errors.New("--hmac-key-file: want the key file the router was given"))
	}
	if o.gateways < 1 || o.gateways > 4096 || o.interval < 10*time.Millisecond || o.warmup < 0 || o.measure < time.Second ||
		o.rps < 0 || o.rps > 10000 || o.capacity < 1 || o.regions < 1 || o.sessions < 1 || o.clientMax < 1 {
		errs = append(errs, errors.New("want 1-4096 gateways, an interval >= 10ms, a measured window >= 1s, 0-10000 rps and positive capacity, regions, sessions and max-in-flight"))
	}
	return o, errors.Join(errs...)
}

// Result is what one run measured.
type Result struct {
	Gateways       int     `json:"gateways"`
	IntervalS      float64 `json:"interval_s"`
	WindowS        float64 `json:"window_s"`
	Messages       int64   `json:"stats_messages"`
	MessageErrors  int64   `json:"stats_errors"`
	MessagesPerS   float64 `json:"stats_per_s"`
	MessageBytes   int     `json:"stats_bytes"`
	RouterCPUS     float64 `json:"router_cpu_s"`
	RouterCores    float64 `json:"router_cores"`
	CPUPerMessage  float64 `json:"router_cpu_us_per_stats"`
	RouterRSSMB    float64 `json:"router_rss_mb"`
	RouterPeakMB   float64 `json:"router_peak_rss_mb"`
	Requests       int     `json:"requests"`
	RequestErrors  int64   `json:"request_errors"`
	LatencyP50Ms   float64 `json:"latency_p50_ms"`
	LatencyP99Ms   float64 `json:"latency_p99_ms"`
	LatencyMaxMs   float64 `json:"latency_max_ms"`
	Probes         int64   `json:"router_probes"`
	ToolCPUS       float64 `json:"load_tool_cpu_s"`
	BackendsListed int     `json:"backends_at_router"`
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	ring, err := auth.LoadKeyring(o.keyFile)
	if err != nil {
		return err
	}
	key, ok := ring.Signing(auth.RoleGateway)
	if !ok {
		return fmt.Errorf("%s holds no key that signs as a gateway", o.keyFile)
	}
	fl := newFleet(o.gateways)
	urls := make([]string, o.gateways)
	for i := range o.gateways {
		// A listener per gateway, as in a fleet: the router keeps its
		// connections (and its link) per gateway address.
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("gateway %d of %d: %w (raise the open-file limit?)", i, o.gateways, err)
		}
		srv := &http.Server{Handler: fl.gateway(i), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		defer func() { _ = srv.Close() }()
		urls[i] = "http://" + lis.Addr().String()
	}

	ctx, cancel := context.WithTimeout(ctx, o.warmup+o.measure+time.Minute)
	defer cancel()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}}
	var sent, failed atomic.Int64
	var msgBytes atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range o.gateways {
		wg.Go(func() {
			g := gatewaySender{o: &o, i: i, url: urls[i], fl: fl, signer: auth.NewSigner(key, gwID(i)), client: client}
			g.loop(ctx, stop, &sent, &failed, &msgBytes)
		})
	}
	time.Sleep(o.warmup)

	// The measured window.
	cpu0, err := procCPU(o.pid)
	if err != nil {
		return err
	}
	tool0, sent0, failed0, probes0 := cputime.Used(), sent.Load(), failed.Load(), fl.probes.Load()
	start := time.Now()
	lat, reqErrs := routeRequests(ctx, client, o, start.Add(o.measure))
	wall := time.Since(start)
	cpu1, err := procCPU(o.pid)
	if err != nil {
		return err
	}
	rss, peak, err := procMem(o.pid)
	if err != nil {
		return err
	}
	res := Result{Gateways: o.gateways, IntervalS: o.interval.Seconds(), WindowS: wall.Seconds(),
		Messages: sent.Load() - sent0, MessageErrors: failed.Load() - failed0, RouterCPUS: (cpu1 - cpu0).Seconds(),
		RouterRSSMB: rss, RouterPeakMB: peak, Requests: len(lat), RequestErrors: reqErrs, Probes: fl.probes.Load() - probes0,
		ToolCPUS: (cputime.Used() - tool0).Seconds()}
	res.MessagesPerS = float64(res.Messages) / wall.Seconds()
	res.RouterCores = res.RouterCPUS / wall.Seconds()
	if n := sent.Load(); n > 0 {
		res.MessageBytes = int(msgBytes.Load() / n)
	}
	if res.Messages > 0 {
		res.CPUPerMessage = res.RouterCPUS * 1e6 / float64(res.Messages)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / 1e6 }
		res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs = q(0.5), q(0.99), float64(lat[len(lat)-1])/1e6
	}
	res.BackendsListed = fl.seen()
	close(stop)
	wg.Wait()
	if o.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	_, err = fmt.Fprintf(stdout, "gateways %d every %v: %d stats messages in %.1fs (%.0f/s, %d failed, %d bytes each)\n"+
		"router: %.2f CPU s (%.3f cores), %.1f us CPU per stats message (probes and xDS included: %d probes), RSS %.1f MB (peak %.1f MB)\n"+
		"requests routed meanwhile: %d (%d failed), latency p50 %.2f ms, p99 %.2f ms, max %.2f ms; load tool %.2f CPU s\n",
		res.Gateways, o.interval, res.Messages, res.WindowS, res.MessagesPerS, res.MessageErrors, res.MessageBytes,
		res.RouterCPUS, res.RouterCores, res.CPUPerMessage, res.Probes, res.RouterRSSMB, res.RouterPeakMB,
		res.Requests, res.RequestErrors, res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs, res.ToolCPUS)
	return err
}

func gwID(i int) string { return fmt.Sprintf("gw-%04d", i) }

// fleet answers, for every gateway, the router's requests (a short
// completion) and probes, counting the requests each gateway got.
type fleet struct {
	received []atomic.Uint64
	active   []atomic.Int64
	probes   atomic.Int64
}

func newFleet(n int) *fleet {
	return &fleet{received: make([]atomic.Uint64, n), active: make([]atomic.Int64, n)}
}

// gateway is gateway i's handler.
func (f *fleet) gateway(i int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { f.serve(i, w, r) }
}

func (f *fleet) serve(i int, w http.ResponseWriter, r *http.Request) {
	switch path := r.URL.Path; {
	case path == "/health":
		f.probes.Add(1)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/v1/"):
		f.received[i].Add(1)
		f.active[i].Add(1)
		defer f.active[i].Add(-1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}`))
	default:
		http.NotFound(w, r) // a link upgrade: the router falls back to plain HTTP
	}
}

// seen counts the gateways that got at least one request.
func (f *fleet) seen() int {
	n := 0
	for i := range f.received {
		if f.received[i].Load() > 0 {
			n++
		}
	}
	return n
}

type gatewaySender struct {
	o      *options
	i      int
	url    string
	fl     *fleet
	signer *auth.Signer
	client *http.Client
}

// loop sends a stats message every interval, the first after an offset
// that spreads the gateways over the interval.
func (g *gatewaySender) loop(ctx context.Context, stop chan struct{}, sent, failed, bytesSent *atomic.Int64) {
	offset := time.Duration(int64(g.o.interval) * int64(g.i) / int64(g.o.gateways))
	t := time.NewTimer(offset)
	defer t.Stop()
	rng := rand.New(rand.NewPCG(uint64(g.i), 7))
	sig := &telemetry.Signals{State: telemetry.Ready, Running: 4, QueueDepth: 1, TTFTP95: 180 * time.Millisecond, KVFill: 0.4,
		Hardware: true, GPUUtil: 0.8, MemUtil: 0.7, SMOccupancy: 0.5, DRAMActive: 0.4, TempC: 61, SMClockMHz: 1800, MaxSMClockMHz: 1980, MaxModelLen: 32768}
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C:
		}
		t.Reset(g.o.interval)
		seq++
		sig.Running, sig.KVFill = rng.IntN(g.o.capacity+1), rng.Float64()
		m := wire.Stats{Backend: gwID(g.i), URL: g.url, Region: fmt.Sprintf("region-%d", g.i%g.o.regions), Seq: seq,
			Models: []string{"model-a"}, MaxModelLen: 32768, OwnedBy: "vllm", Workers: 1,
			Capacity: g.o.capacity, Active: int(g.fl.active[g.i].Load()) + rng.IntN(g.o.capacity/2+1), InputTPS: 2000 * rng.Float64(), MaxInputTPS: 9000,
			Received: g.fl.received[g.i].Load(), Completed: g.fl.received[g.i].Load(),
			Engine: wire.EngineMetrics{Running: float64(sig.Running), KVUsage: sig.KVFill, ScrapedAgo: 0.2}, Interval: g.o.interval, Signals: sig}
		if err := g.send(ctx, &m, bytesSent); err != nil {
			if failed.Add(1) == 1 {
				fmt.Fprintf(os.Stderr, "statsload: %s: %v\n", gwID(g.i), err)
			}
			continue
		}
		sent.Add(1)
	}
}

func (g *gatewaySender) send(ctx context.Context, m *wire.Stats, bytesSent *atomic.Int64) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	bytesSent.Add(int64(len(body)))
	req, err := g.signer.NewRequest(auth.Audience("router", g.o.routerID), http.MethodPost, g.o.router+wire.PathStats, body)
	if err != nil {
		return err
	}
	resp, err := g.client.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("router answered %s: %s", resp.Status, bytes.TrimSpace(reply))
	}
	return nil
}

// routeRequests sends completions through the router at o.rps until end
// and returns their latencies (ns) and how many failed.
func routeRequests(ctx context.Context, client *http.Client, o options, end time.Time) ([]int64, int64) {
	if o.rps == 0 {
		time.Sleep(time.Until(end))
		return nil, 0
	}
	var mu sync.Mutex
	var lat []int64
	var errs atomic.Int64
	var wg sync.WaitGroup
	slots := make(chan struct{}, o.clientMax)
	gap := time.Duration(float64(time.Second) / o.rps)
	for i, next := 0, time.Now(); next.Before(end); i, next = i+1, next.Add(gap) {
		time.Sleep(time.Until(next))
		select {
		case slots <- struct{}{}:
		default:
			errs.Add(1) // too many in flight: counted as failed, not queued
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			body := fmt.Sprintf(`{"model":"model-a","user":"session-%d","max_tokens":8,"messages":[{"role":"user","content":"hello"}]}`, i%o.sessions)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.router+"/v1/chat/completions", strings.NewReader(body))
			if err != nil {
				errs.Add(1)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				errs.Add(1)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			d := time.Since(t0)
			if resp.StatusCode != http.StatusOK {
				errs.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, int64(d))
			mu.Unlock()
		})
	}
	wg.Wait()
	return lat, errs.Load()
}

// procCPU is a process's user plus system CPU time, from /proc.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("router process %d: %w", pid, err)
	}
	// Fields after the command name, which is in parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

// procMem is a process's resident and peak resident memory, in MB.
func procMem(pid int) (rss, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("router process %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			peak = kb / 1024
		}
	}
	return rss, peak, nil
}
