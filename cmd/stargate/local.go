package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/stargate-llm/stargate/internal/memnet"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/gatewayd"
	"github.com/stargate-llm/stargate/serve/routerd"
	"github.com/stargate-llm/stargate/serve/tlsconf"
)

// gatewayFlags registers the flags that describe a gateway's backend, its
// limits and its routers: unprefixed for stargate gateway, prefixed
// "gateway-" for the gateway a router runs in its own process.
func gatewayFlags(f *pflag.FlagSet, cfg *gatewayd.Config, prefix, what string) {
	f.StringArrayVar(&cfg.Engines, prefix+"engine", nil, what+"engine base URL (repeat for one URL per GPU worker)")
	f.IntVar(&cfg.Workers, prefix+"workers", 0, what+"workers behind a single engine URL (0: ask its /metrics, else 1)")
	f.StringArrayVar(&cfg.DCGM, prefix+"dcgm-url", nil, what+"DCGM exporter metrics URL for hardware signals (repeatable; a stargate engine serves one at /dcgm/metrics)")
	f.StringArrayVar(&cfg.Routers, prefix+"router", nil, what+"router base URL to send stats to (repeatable)")
	f.StringVar(&cfg.ID, prefix+"id", cfg.ID, what+"backend name routers know this gateway by")
	f.StringVar(&cfg.Region, prefix+"region", "", what+"region of this backend")
	f.StringVar(&cfg.Advertise, prefix+"advertise", "", what+"URL routers use to reach this gateway (default http://LISTEN)")
	if prefix != "" { // stargate gateway defines these itself
		f.BoolVar(&cfg.OpenDataPlane, prefix+"open-data-plane", false, what+"serve completions to anyone, even with keys (tests, a trusted network)")
		f.BoolVar(&cfg.OpenInfo, prefix+"open-info", false, what+"serve /metrics without a key (scrapers on a private network)")
		f.BoolVar(&cfg.ExposeBackend, prefix+"expose-backend", false, what+"name this gateway to clients in X-Stargate-Backend")
	}
	f.IntVar(&cfg.Slots.MaxInflightPerWorker, prefix+"max-inflight-per-worker", cfg.Slots.MaxInflightPerWorker, what+"submissions one worker may hold at once")
	f.IntVar(&cfg.Slots.MaxWaitingRequests, prefix+"max-waiting-requests", cfg.Slots.MaxWaitingRequests, what+"submissions that may wait for a worker permit")
	f.DurationVar(&cfg.Admission.HeartbeatInterval, prefix+"heartbeat-interval", cfg.Admission.HeartbeatInterval, what+"most time between two stats messages to the routers (their --heartbeat-ttl should be more than one interval)")
	f.DurationVar(&cfg.Admission.WarmUp, prefix+"warm-up", cfg.Admission.WarmUp, what+"how long the backend stays Loading after its engine serves again (health passing, a model listed)")
	f.DurationVar(&cfg.UpstreamIdleTimeout, prefix+"upstream-idle-timeout", cfg.UpstreamIdleTimeout, what+"longest wait for the engine's next byte; longer quarantines the worker")
	engineFlags(f, &cfg.EngineOptions, prefix, what)
	f.Var(&cfg.EngineTransport, prefix+"engine-transport", what+engineTransportUsage)
}

// engineTransportUsage is the help of --engine-transport.
const engineTransportUsage = "how requests reach the engines: net-http (net/http, the default) or h1 (the hand-written HTTP/1.1 client over raw socket calls: plain http:// engines, Linux/Unix only)"

// engineFlags registers the flags for engines not written for Stargate
// (vLLM, SGLang); docs/real-engines.md shows them in use.
func engineFlags(f *pflag.FlagSet, o *gatewayd.EngineOptions, prefix, what string) {
	f.DurationVar(&o.MaxQueueWait, prefix+"max-queue-wait", o.MaxQueueWait, what+"longest wait for admission or a worker permit, then 503 with Retry-After (keep it below the router's attempt budget)")
	f.StringVar(&o.EngineAPIKeyFile, prefix+"engine-api-key-file", "", what+"file holding the engines' API key (their --api-key), sent as Authorization: Bearer")
	f.BoolVar(&o.LearnSlots, prefix+"learn-slots", true, what+"size worker slots by the engine's own sequence limit where it says it (else --"+prefix+"max-inflight-per-worker)")
	f.BoolVar(&o.RecoverOnRestart, prefix+"recover-on-engine-restart", false, what+"opt-in: release a quarantined worker of an engine without a fence (vLLM, SGLang) once it restarted and its metrics show nothing running or waiting")
	f.IntVar(&o.RecoverIdleScrapes, prefix+"recover-idle-scrapes", o.RecoverIdleScrapes, what+"consecutive idle scrapes --"+prefix+"recover-on-engine-restart needs")
}

// localGatewayAddr is the in-memory address of a router's own gateway when
// no other router may reach it (no --gateway-listen).
const localGatewayAddr = "gateway.in-process:80"

// localGateway is the gateway a router runs in its own process with
// --gateway-engine: the router calls its handler directly (router.Local),
// other routers reach it over --gateway-listen.
type localGateway struct {
	cfg    gatewayd.Config
	listen string // --gateway-listen
	mem    *memnet.Network
	// addr is the in-memory address: the advertised one, else the TCP
	// listener's, else localGatewayAddr.
	addr string
	// randomKey: no --hmac-key-file, so the router and the gateway share a
	// key nobody else knows.
	randomKey bool
	log       *slog.Logger

	srv   *gatewayd.Server
	local *routerd.Local // the router's way in
	// memLn is the router's way in over the network: for its health probes,
	// requests on a path with an injected fault, and a static --backend
	// spelled otherwise.
	memLn net.Listener
	tcpLn net.Listener // other routers' way in; nil without --gateway-listen
	// sec are the router's TLS and limit flags, which the gateway's
	// listener shares; tlsCfg its TLS (nil: plain HTTP).
	sec    *secureFlags
	tlsCfg *tls.Config
}

// newLocalGateway checks the --gateway-* flags and, with --gateway-engine,
// prepares the router for its gateway: its dials go through an in-memory
// network, and the two share one key (a random one when the operator gave
// none) and one logger. Without --gateway-engine it returns nil. It runs
// before router.New.
func newLocalGateway(rcfg *routerd.Config, gcfg gatewayd.Config, listen string, sec *secureFlags) (*localGateway, error) {
	if len(gcfg.Engines) == 0 {
		if listen != "" || len(gcfg.Routers) > 0 {
			return nil, usagef("--gateway-listen and --gateway-router need --gateway-engine")
		}
		return nil, nil
	}
	if len(gcfg.Routers) > 0 && listen == "" {
		return nil, usagef("--gateway-router needs --gateway-listen: other routers reach the gateway there")
	}
	lg := &localGateway{listen: listen, mem: memnet.New(), addr: localGatewayAddr, log: rcfg.Logger, sec: sec}
	if gcfg.Advertise != "" {
		a, err := advertisedAddr(gcfg.Advertise, sec.scheme())
		if err != nil {
			return nil, err
		}
		lg.addr = a
	}
	if len(rcfg.Key.Secret) == 0 {
		rcfg.Key, lg.randomKey = auth.RandomKey("local"), true
	}
	if lg.log == nil {
		lg.log = slog.New(slog.DiscardHandler)
	}
	gcfg.Key, gcfg.Keys, gcfg.Logger = rcfg.Key, rcfg.Keys, lg.log
	// Other routers reach the gateway with the router's certificate: they
	// must show theirs, of role router (or operator), with --client-ca-file.
	var err error
	if lg.tlsCfg, err = sec.server(lg.log, true, tlsconf.RoleRouter, tlsconf.RoleOperator); err != nil {
		return nil, err
	}
	if gcfg.DialTLS, err = sec.dialer(nil, rolesFor(hostsOf(gcfg.Routers), tlsconf.RoleRouter), false); err != nil {
		return nil, err
	}
	lg.local = &routerd.Local{}
	rcfg.Local, rcfg.Dial = lg.local, lg.mem.Dial(dialBackends)
	lg.cfg = gcfg
	return lg, nil
}

// open opens the gateway's listeners and builds it: it registers with the
// router at routerURL like any other gateway, and its metrics join reg (the
// router's /metrics; without --gateway-listen it has no port of its own).
func (lg *localGateway) open(routerURL string, reg prometheus.Registerer) error {
	if lg.listen != "" {
		tl, err := net.Listen("tcp", lg.listen)
		if err != nil {
			return usagef("--gateway-listen %q: %v", lg.listen, err)
		}
		lg.tcpLn = tl
		if lg.cfg.Advertise == "" {
			lg.addr = tl.Addr().String()
		}
	}
	if lg.cfg.Advertise == "" {
		lg.cfg.Advertise = lg.sec.scheme() + "://" + lg.addr
	}
	// The router's own dials to the advertised address stay in memory.
	ml, err := lg.mem.Listen(lg.addr)
	if err != nil {
		lg.close()
		return failure{err}
	}
	lg.memLn = ml
	lg.cfg.Routers = append([]string{routerURL}, lg.cfg.Routers...)
	if lg.srv, err = gatewayd.New(lg.cfg); err != nil {
		lg.close()
		return usageError{err}
	}
	if err := lg.local.Open(lg.cfg.Advertise, lg.srv.Handler()); err != nil {
		lg.close()
		return failure{err}
	}
	for _, c := range lg.srv.Collectors() {
		if err := reg.Register(c); err != nil {
			lg.close()
			return failure{fmt.Errorf("the gateway's metrics: %w", err)}
		}
	}
	return nil
}

// run starts the gateway (it waits for the engine to answer) and serves it
// on its listeners until ctx ends. The router serves meanwhile: until the
// gateway registers it has no backend, or only its others.
func (lg *localGateway) run(ctx context.Context) error {
	if err := lg.srv.Start(ctx); err != nil {
		lg.close()
		if ctx.Err() != nil {
			return nil
		}
		return failure{err}
	}
	if lg.randomKey {
		lg.log.Warn("no --hmac-key-file: the router and its gateway share a random key, so a worker quarantined after an uncertain completion can be neither fenced nor released and stays out of service until the router restarts; give the router and the engine the same key file")
	}
	errc := make(chan error, 1)
	if lg.tcpLn != nil {
		go func() {
			errc <- serveHandler(ctx, lg.tcpLn, lg.srv.Handler(), lg.sec.options("in-process gateway", lg.tlsCfg, lg.log))
		}()
	}
	// The in-memory listener never leaves the process: plain HTTP, even
	// when the gateway's URL is https (routerDialTLS).
	mem := lg.sec.options("in-process gateway (memory)", nil, lg.log)
	mem.InMemory = true
	err := serveHandler(ctx, lg.memLn, lg.srv.Handler(), mem)
	if lg.tcpLn != nil {
		if terr := <-errc; err == nil {
			err = terr
		}
	}
	drain, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cerr := lg.local.Close(drain); cerr != nil {
		lg.log.Warn("stopping the in-process gateway", "err", cerr)
	}
	lg.srv.Wait()
	return err
}

func (lg *localGateway) close() {
	for _, l := range []net.Listener{lg.memLn, lg.tcpLn} {
		if l != nil {
			_ = l.Close()
		}
	}
}

// advertisedAddr is the host:port of an advertised gateway URL, whose
// scheme must be what the gateway serves (https with --tls-cert-file).
func advertisedAddr(advertise, scheme string) (string, error) {
	u, err := url.Parse(advertise)
	if err != nil || u.Scheme != scheme || u.Host == "" || u.Path != "" && u.Path != "/" {
		return "", usagef("--gateway-advertise %q: want %s://HOST[:PORT]", advertise, scheme)
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[scheme]), nil
	}
	return u.Host, nil
}

// routerDialTLS gives the router its verified TLS dialer for https
// gateways (their certificates must name role gateway, or router for
// another router's in-process gateway, with --client-ca-file). Its own
// in-process gateway is reached in memory without TLS: nothing leaves the
// process.
func routerDialTLS(cfg *routerd.Config, sec *secureFlags, lg *localGateway) error {
	d, err := sec.dialer(cfg.Dial, func(string) []tlsconf.Role { return []tlsconf.Role{tlsconf.RoleGateway, tlsconf.RoleRouter} }, cfg.HTTP2)
	if err != nil || d == nil {
		return err
	}
	cfg.DialTLS = d
	if lg != nil {
		plain := cfg.Dial
		cfg.DialTLS = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == lg.addr {
				return plain(ctx, network, addr)
			}
			return d(ctx, network, addr)
		}
	}
	return nil
}
