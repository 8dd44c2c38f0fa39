package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/internal/netsim"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/gatewayd"
	"github.com/stargate-llm/stargate/serve/routerd"
	"github.com/stargate-llm/stargate/sim"
)

// MaxModelLen is the engines' context limit (or their KV budget if smaller):
// a common serving limit, past every prompt of the routing study.
const MaxModelLen = 131072

// Options are the live-only settings of a fleet.
type Options struct {
	// RoutersPerRegion replaces each region's router count when > 0.
	RoutersPerRegion int
	// HeartbeatTTL, if > 0, replaces the routers' heartbeat TTL
	// (router.DefaultLiveHeartbeatTTL); the gateways' heartbeat interval
	// is the simulator configuration's (sim.Config.Gateway).
	HeartbeatTTL time.Duration
	// Seed seeds the engines' output text and the policies.
	Seed   uint64
	Logger *slog.Logger
	// ObserveQueue, if set, hears every gateway's queue times (see
	// gateway.Config.ObserveQueue).
	ObserveQueue func(queued time.Duration)
	// Hooks, if set, gives router r's in-process hooks (see router.Hooks).
	Hooks func(router int) routerd.Hooks
	// Console turns on every router's operator console (router.Config.Console).
	Console bool
	// Compat is the engines' behaviour (engine.CompatVLLM: like a real vLLM,
	// one worker per URL); MaxModelLen, if > 0, their context limit.
	Compat      engined.Compat
	MaxModelLen int
	// OpenInfo serves the gateways' /metrics to anyone (scrapers).
	OpenInfo bool
	// TLS, if set, serves every listener over TLS and has the services
	// verify one another (see TLS); nil is plain HTTP on loopback.
	TLS *TLS
	// Pools are every router's pools (router.Config.Pools), by backend
	// name as in cfg.
	Pools []routerd.Pool
	// EngineTransport is how every gateway reaches its engine (see
	// gateway.Config.EngineTransport): net/http by default; with h1 the
	// engine leg leaves the in-process network, which has no delay there.
	EngineTransport gatewayd.EngineTransport
}

// Fleet is a running fleet.
type Fleet struct {
	// RouterURLs lists the routers, region by region; RouterRegion[i] is
	// router i's region index.
	RouterURLs   []string
	RouterRegion []int
	Engines      []*engined.Server
	Gateways     []*gatewayd.Server
	Routers      []*routerd.Server
	// GatewayURLs and EngineURLs are by backend.
	GatewayURLs, EngineURLs []string
	// Key is the HMAC key every service of the fleet shares, for an
	// operator's signed admin calls.
	Key auth.Key
	// RouterPaths[r] is router r's in-process network to the gateways, and
	// GatewayPaths[b] backend b's gateway's to the routers (package netsim);
	// SetPathJitter changes them.
	RouterPaths, GatewayPaths []*netsim.Transport

	servers []*http.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	// engineCfg and runCtx start an engine again (RestartEngine).
	engineCfg []engined.Config
	runCtx    context.Context

	mu sync.Mutex
	// By backend: its gateway's and engine's servers and what stops their
	// loops (KillBackend); killed says which are dead.
	gatewayHS, engineHS []*http.Server
	stopGW, stopEngine  []context.CancelFunc
	killed              []bool

	tls        *TLS
	transports []*http.Transport // the gateways' TLS clients, closed by Stop
}

// Start brings up the fleet of cfg and returns once every gateway has
// registered with every router (or ctx ends).
func Start(ctx context.Context, cfg sim.Config, reg *policy.Registry, opts Options) (*Fleet, error) {
	if err := cfg.Validate(reg); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &Fleet{cancel: cancel, tls: opts.TLS}
	ok := false
	defer func() {
		if !ok {
			f.Stop()
		}
	}()
	key := auth.RandomKey("fleet")
	f.Key = key
	f.runCtx = runCtx
	listen := func() (net.Listener, string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, "", fmt.Errorf("fleet: %w", err)
		}
		return ln, f.scheme() + "://" + ln.Addr().String(), nil
	}
	// Listeners first: every service needs the others' addresses.
	var routerLns, gatewayLns, engineLns []net.Listener
	for ri, r := range cfg.Regions {
		n := r.Routers
		if opts.RoutersPerRegion > 0 {
			n = opts.RoutersPerRegion
		}
		for range n {
			ln, u, err := listen()
			if err != nil {
				return nil, err
			}
			routerLns = append(routerLns, ln)
			f.RouterURLs = append(f.RouterURLs, u)
			f.RouterRegion = append(f.RouterRegion, ri)
		}
	}
	for range cfg.Backends {
		ln, u, err := listen()
		if err != nil {
			return nil, err
		}
		gatewayLns, f.GatewayURLs = append(gatewayLns, ln), append(f.GatewayURLs, u)
		ln, u, err = listen()
		if err != nil {
			return nil, err
		}
		engineLns, f.EngineURLs = append(engineLns, ln), append(f.EngineURLs, u)
	}

	for i, b := range cfg.Backends {
		ec := engined.DefaultConfig()
		ec.ID, ec.GPUs, ec.Profile, ec.Model, ec.Seed, ec.Key = b.Name, b.Workers, b.Profile, engined.DefaultModel, opts.Seed, key
		ec.MaxModelLen = min(b.Profile.KVTokens, MaxModelLen)
		if opts.MaxModelLen > 0 {
			ec.MaxModelLen = opts.MaxModelLen
		}
		if len(b.Models) > 0 { // a mock engine serves one model
			ec.Model = b.Models[0]
		}
		ec.Compat = opts.Compat
		es, err := engined.New(ec)
		if err != nil {
			return nil, fmt.Errorf("fleet: backend %s: %w", b.Name, err)
		}
		f.Engines, f.engineCfg = append(f.Engines, es), append(f.engineCfg, ec)
		f.engineHS = append(f.engineHS, f.serve(engineLns[i], es.Handler()))
		engCtx, stopEngine := context.WithCancel(runCtx)
		f.stopEngine = append(f.stopEngine, stopEngine)
		f.wg.Add(1)
		go func() { defer f.wg.Done(); es.Run(engCtx) }()

		tr := netsim.New(f.clientTransport(), opts.Seed+uint64(i))
		f.GatewayPaths = append(f.GatewayPaths, tr)
		for ri, u := range f.RouterURLs {
			tr.Set(hostOf(u), cfg.Latency[b.Region][f.RouterRegion[ri]], 0)
		}
		gc := gatewayd.DefaultConfig()
		gc.ID, gc.Region, gc.Engines, gc.Workers = b.Name, cfg.Regions[b.Region].Name, []string{f.EngineURLs[i]}, b.Workers
		gc.DCGM = []string{f.EngineURLs[i] + "/dcgm/metrics"}
		gc.Admission, gc.Routers, gc.Advertise, gc.Key, gc.Transport = cfg.Gateway, f.RouterURLs, f.GatewayURLs[i], key, tr
		if cfg.Gateway.MaxConcurrency == 0 {
			gc.Slots.MaxInflightPerWorker = cfg.Gateway.SlotsPerWorker // the simulator's slots per worker
		}
		gc.Logger, gc.ObserveQueue = opts.Logger, opts.ObserveQueue
		gc.OpenInfo = opts.OpenInfo
		gc.EngineTransport = opts.EngineTransport
		gs, err := gatewayd.New(gc)
		if err != nil {
			return nil, fmt.Errorf("fleet: backend %s: %w", b.Name, err)
		}
		f.Gateways = append(f.Gateways, gs)
	}
	for ri, u := range f.RouterURLs {
		tr := netsim.New(nil, opts.Seed+1000+uint64(ri))
		f.RouterPaths = append(f.RouterPaths, tr)
		for i, b := range cfg.Backends {
			tr.Set(hostOf(f.GatewayURLs[i]), cfg.Latency[f.RouterRegion[ri]][b.Region], 0)
		}
		rc := routerd.DefaultConfig()
		if opts.HeartbeatTTL > 0 {
			rc.Liveness.HeartbeatTTL = opts.HeartbeatTTL
		}
		rc.ID, rc.Policy, rc.Params, rc.Seed, rc.Key = fmt.Sprintf("router-%d", ri), cfg.Policy, cfg.Params, opts.Seed+uint64(ri), key
		rc.ExposeBackend = true // experiments attribute each answer to its backend
		rc.Network = func(base http.RoundTripper) http.RoundTripper { tr.Base = base; return tr }
		rc.DialTLS = f.dialTLS()
		rc.Logger = opts.Logger
		if opts.Hooks != nil {
			rc.Hooks = opts.Hooks(ri)
		}
		rc.Console = opts.Console
		rc.Pools = opts.Pools
		rs, err := routerd.New(rc, reg)
		if err != nil {
			return nil, fmt.Errorf("fleet: router %s: %w", u, err)
		}
		f.Routers = append(f.Routers, rs)
		f.serve(routerLns[ri], rs.Handler())
		f.wg.Add(1)
		go func() { defer f.wg.Done(); rs.Run(runCtx) }()
	}
	for i, gs := range f.Gateways {
		gwCtx, stop := context.WithCancel(runCtx)
		f.stopGW = append(f.stopGW, stop)
		if err := gs.Start(gwCtx); err != nil {
			return nil, err
		}
		f.gatewayHS = append(f.gatewayHS, f.serve(gatewayLns[i], gs.Handler()))
	}
	f.killed = make([]bool, len(cfg.Backends))
	if err := f.waitRegistered(ctx, len(cfg.Backends)); err != nil {
		return nil, err
	}
	ok = true
	return f, nil
}

func (f *Fleet) serve(ln net.Listener, h http.Handler) *http.Server {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	f.servers = append(f.servers, hs)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := hs.Serve(f.listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener closed under us; Stop reports nothing more useful
		}
	}()
	return hs
}

// KillBackend kills backend b as a crash would: its gateway and engine stop
// at once, so requests they hold fail (their connections close), later
// connections are refused (the listeners are gone), and its heartbeats and
// stats stop. A killed backend stays dead.
func (f *Fleet) KillBackend(b int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b < 0 || b >= len(f.killed) {
		return fmt.Errorf("fleet: no backend %d (the fleet has %d)", b, len(f.killed))
	}
	if f.killed[b] {
		return nil
	}
	f.killed[b] = true
	f.stopGW[b]()
	_ = f.gatewayHS[b].Close()
	f.Gateways[b].CloseRouterConns()
	_ = f.engineHS[b].Close()
	f.stopEngine[b]()
	return nil
}

// KillEngine crashes backend b's engine alone: its server closes at once,
// so the streams it holds end mid-way and later connections are refused,
// while its gateway lives on (and quarantines the workers whose requests
// ended uncertainly). A killed engine stays dead.
func (f *Fleet) KillEngine(b int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b < 0 || b >= len(f.killed) {
		return fmt.Errorf("fleet: no backend %d (the fleet has %d)", b, len(f.killed))
	}
	_ = f.engineHS[b].Close()
	f.stopEngine[b]()
	return nil
}

// SetPathJitter gives every message between backend b's gateway and every
// router, both ways, an extra exponential delay of mean jitter on top of
// the regions' latency (the simulator's path fault; zero removes it).
func (f *Fleet) SetPathJitter(b int, jitter time.Duration) error {
	if b < 0 || b >= len(f.GatewayURLs) || jitter < 0 {
		return fmt.Errorf("fleet: path jitter %v on backend %d: want a backend in [0, %d) and jitter >= 0", jitter, b, len(f.GatewayURLs))
	}
	gw := hostOf(f.GatewayURLs[b])
	for _, tr := range f.RouterPaths {
		p := tr.Path(gw)
		p.Jitter, p.Exponential = jitter, true
		tr.SetPath(gw, p)
	}
	for _, u := range f.RouterURLs {
		p := f.GatewayPaths[b].Path(hostOf(u))
		p.Jitter, p.Exponential = jitter, true
		f.GatewayPaths[b].SetPath(hostOf(u), p)
	}
	return nil
}

// waitRegistered waits until every router knows every backend.
func (f *Fleet) waitRegistered(ctx context.Context, backends int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := true
		for _, r := range f.Routers {
			if len(r.Backends()) < backends {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("fleet: gateways did not register with every router within 30 s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts every server down, letting requests in flight end within a
// short grace, and waits for the fleet's goroutines.
func (f *Fleet) Stop() {
	shutdown, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for i := len(f.servers) - 1; i >= 0; i-- {
		_ = f.servers[i].Shutdown(shutdown)
	}
	for _, hs := range f.servers {
		_ = hs.Close()
	}
	for _, r := range f.Routers {
		r.Close()
	}
	for _, g := range f.Gateways {
		g.CloseRouterConns()
	}
	f.cancel()
	f.wg.Wait()
	for _, g := range f.Gateways {
		g.Wait()
	}
	for _, tr := range f.transports {
		tr.CloseIdleConnections()
	}
}
