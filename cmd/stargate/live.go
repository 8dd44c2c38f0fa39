package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/discovery"
	"github.com/stargate-llm/stargate/drive"
	"github.com/stargate-llm/stargate/internal/rawio"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/fleet"
	"github.com/stargate-llm/stargate/serve/gatewayd"
	"github.com/stargate-llm/stargate/serve/routerd"
	"github.com/stargate-llm/stargate/serve/tlsconf"
	"github.com/stargate-llm/stargate/study"
	"github.com/stargate-llm/stargate/workload"
	"github.com/stargate-llm/stargate/xds"
)

// loadKeys reads the HMAC key file at path (see docs/security.md: one
// "ROLE KEY-ID SECRET" line per key, or the older one-key format) into
// ring, and into key the key a service of role signs with (else the
// file's first); an empty path leaves both unset.
func loadKeys(path string, role auth.Role, ring **auth.Keyring, key *auth.Key) error {
	if path == "" {
		return nil
	}
	r, err := auth.LoadKeyring(path)
	if err != nil {
		return usageError{err}
	}
	k, ok := r.Signing(role)
	if !ok {
		k = r.Keys()[0]
	}
	*ring, *key = r, k
	return nil
}

// warnLegacyKey logs that a one-key file serves every role.
func warnLegacyKey(log *slog.Logger, ring *auth.Keyring) {
	if ring != nil && ring.Legacy() {
		log.Warn("the HMAC key file holds one key for every role: any holder can sign stats, admin calls and router requests; use one \"ROLE KEY-ID SECRET\" line per role (docs/security.md)")
	}
}

// loadAPIKeys reads a client API keys file into keys; an empty path leaves
// it unset.
func loadAPIKeys(path string, keys **auth.APIKeys) error {
	if path == "" {
		return nil
	}
	k, err := auth.LoadAPIKeys(path)
	if err != nil {
		return usageError{err}
	}
	*keys = k
	return nil
}

// dialBackends opens a router's connections to its backends, HTTP/2
// included: TCP with raw reads and writes (package rawio).
var dialBackends = rawio.Dialer(&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second})

func logger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func newGatewayCmd() *cobra.Command {
	cfg := gatewayd.DefaultConfig()
	var slotMode string
	var listen, keyFile, apiKeys, pprofAddr string
	var verbose bool
	var sec secureFlags
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Front one backend: admission, worker slots, quarantine, stats to routers",
		Long: `Serve the OpenAI API on --listen in front of one backend: a stargate engine
(or any engine serving several workers at one URL), or one engine URL per GPU
worker (repeat --engine). Requests are admitted, queued or refused (503 with
Retry-After) by the gateway core; each takes a worker permit. Stats and
heartbeats go, signed with the HMAC key, to every --router.`,
		Example: `  stargate gateway --engine http://127.0.0.1:8001 --router http://127.0.0.1:8080 \
    --id gw-a --advertise http://127.0.0.1:9001 --listen 127.0.0.1:9001 --hmac-key-file key.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadKeys(keyFile, auth.RoleGateway, &cfg.Keys, &cfg.Key); err != nil {
				return err
			}
			if err := loadAPIKeys(apiKeys, &cfg.APIKeys); err != nil {
				return err
			}
			cfg.KeyFile = keyFile // named in the quarantine warning's release command
			if cmd.Flags().Changed("max-inflight-per-worker") && !cmd.Flags().Changed("learn-slots") {
				cfg.LearnSlots = false // the operator's number wins
			}
			if err := applySlotMode(cmd.Flags(), &cfg, slotMode, ""); err != nil {
				return err
			}
			cfg.Logger = logger(cmd.ErrOrStderr(), verbose)
			warnLegacyKey(cfg.Logger, cfg.Keys)
			if cfg.Keys == nil && cfg.APIKeys == nil || cfg.OpenDataPlane {
				cfg.Logger.Warn("the data plane is open: this gateway serves completions to anyone who reaches it; give --hmac-key-file and/or --api-keys")
			}
			// Routers and operators only, with --client-ca-file.
			tlsCfg, err := sec.server(cfg.Logger, true, tlsconf.RoleRouter, tlsconf.RoleOperator)
			if err != nil {
				return err
			}
			pprofCfg, err := sec.pprofTLS(cfg.Logger)
			if err != nil {
				return err
			}
			if cfg.DialTLS, err = sec.dialer(nil, rolesFor(hostsOf(cfg.Routers), tlsconf.RoleRouter), false); err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return usagef("--listen %q: %v", listen, err)
			}
			if cfg.Advertise == "" && len(cfg.Routers) > 0 {
				cfg.Advertise = sec.scheme() + "://" + ln.Addr().String()
			}
			srv, err := gatewayd.New(cfg)
			if err != nil {
				_ = ln.Close()
				return usageError{err}
			}
			ctx := cmd.Context()
			if err := startPprof(ctx, pprofAddr, cmd.ErrOrStderr(), pprofCfg); err != nil {
				_ = ln.Close()
				return err
			}
			if err := srv.Start(ctx); err != nil {
				_ = ln.Close()
				if ctx.Err() != nil {
					return nil
				}
				return failure{err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stargate gateway %s serving on %s://%s\n", cfg.ID, sec.scheme(), ln.Addr())
			err = serveHandler(ctx, ln, srv.Handler(), sec.options("gateway", tlsCfg, cfg.Logger))
			srv.Wait()
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:9001", "address to listen on")
	gatewayFlags(f, &cfg, "", "")
	slotModeFlag(f, &slotMode, "", "")
	f.StringVar(&keyFile, "hmac-key-file", "", "file of HMAC keys, one \"ROLE KEY-ID SECRET\" line each (docs/security.md): signs stats and fences, checks routers' requests and operators' calls")
	f.StringVar(&apiKeys, "api-keys", "", "file of client API keys allowed to call this gateway directly (the xDS/Envoy path), one per line (the key, or sha256:HEX of it)")
	f.BoolVar(&cfg.OpenDataPlane, "open-data-plane", false, "serve completions to anyone, even with keys (tests, a trusted network)")
	f.BoolVar(&cfg.OpenInfo, "open-info", false, "serve /metrics without a key (scrapers on a private network)")
	f.BoolVar(&cfg.ExposeBackend, "expose-backend", false, "name this gateway to clients in X-Stargate-Backend")
	addSecureFlags(f, &sec, true)
	f.StringVar(&pprofAddr, "pprof", "", pprofFlagUsage)
	f.BoolVar(&verbose, "verbose", false, "log debug messages")
	return cmd
}

func newRouterCmd() *cobra.Command {
	cfg := routerd.DefaultConfig()
	var slotMode string
	gcfg := gatewayd.DefaultConfig()
	gcfg.ID = "local"
	var listen, keyFile, apiKeys, pprofAddr, xdsListen, k8sService, k8sPort, kubeconfig, gatewayListen string
	var backends []string
	var pressureFile, poolsFile string
	var verbose bool
	var sec secureFlags
	cmd := &cobra.Command{
		Use:   "router",
		Short: "Serve the OpenAI API and place each request on a backend",
		Long: `Serve an OpenAI-compatible front door on --listen. Backends register by
sending signed stats (gateways started with --router pointing here), or are
listed with --backend NAME=URL[@CAPACITY]. GET /v1/stargate/backends shows
each backend's state, stats and weight.

With --gateway-engine the router also runs the gateway of one backend in its
own process and calls it directly: one process in front of an engine, with
the same admission, slots, quarantine and stats as a separate gateway, and
without the socket hop between them. Other routers can reach that gateway on
--gateway-listen (give them the HMAC key and list them with --gateway-router).
The --gateway-* flags are stargate gateway's flags of the same names.`,
		Example: `  stargate router --listen 127.0.0.1:8080 --policy pulsar-waw --hmac-key-file key.txt
  stargate router --listen 127.0.0.1:8080 --gateway-engine http://127.0.0.1:8001`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := policy.NewRegistry()
			if pressureFile != "" {
				pp, err := config.LoadPressure(pressureFile)
				if err != nil {
					return usageError{err}
				}
				cfg.Params.Pressure = &pp
			}
			if poolsFile != "" {
				pools, err := config.LoadPools(poolsFile)
				if err != nil {
					return usageError{err}
				}
				cfg.Pools = routerPools(pools)
			}
			if err := loadKeys(keyFile, auth.RoleRouter, &cfg.Keys, &cfg.Key); err != nil {
				return err
			}
			if err := loadAPIKeys(apiKeys, &cfg.APIKeys); err != nil {
				return err
			}
			for _, b := range backends {
				sb, err := parseStaticBackend(b)
				if err != nil {
					return usageError{err}
				}
				cfg.Static = append(cfg.Static, sb)
			}
			cfg.Logger = logger(cmd.ErrOrStderr(), verbose)
			warnLegacyKey(cfg.Logger, cfg.Keys)
			var ns, svc string
			if k8sService != "" {
				var ok bool
				if ns, svc, ok = strings.Cut(k8sService, "/"); !ok || ns == "" || svc == "" {
					return usagef("--k8s-service %q: want NAMESPACE/NAME", k8sService)
				}
				cfg.Discovery = true
			}
			if cmd.Flags().Changed("gateway-max-inflight-per-worker") && !cmd.Flags().Changed("gateway-learn-slots") {
				gcfg.LearnSlots = false // the operator's number wins
			}
			if err := applySlotMode(cmd.Flags(), &gcfg, slotMode, "gateway-"); err != nil {
				return err
			}
			// API clients and gateways alike: a client certificate is
			// verified if sent, and PeerIdentity names it.
			tlsCfg, err := sec.server(cfg.Logger, false)
			if err != nil {
				return err
			}
			pprofCfg, err := sec.pprofTLS(cfg.Logger)
			if err != nil {
				return err
			}
			// Envoy (a router's certificate) and operators, with --client-ca-file.
			xdsCfg, err := sec.sideTLS(cfg.Logger, tlsconf.RoleRouter, tlsconf.RoleOperator)
			if err != nil {
				return err
			}
			local, err := newLocalGateway(&cfg, gcfg, gatewayListen, &sec)
			if err != nil {
				return err
			}
			if cfg.Dial == nil {
				cfg.Dial = dialBackends
			}
			if err := routerDialTLS(&cfg, &sec, local); err != nil {
				return err
			}
			srv, err := routerd.New(cfg, reg)
			if err != nil {
				return usageError{err}
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return usagef("--listen %q: %v", listen, err)
			}
			if local != nil {
				if err := local.open(sec.scheme()+"://"+dialable(ln.Addr()), srv.Registerer()); err != nil {
					_ = ln.Close()
					return err
				}
			}
			// Everything that can fail is set up before any goroutine starts.
			var xl net.Listener
			var xs *xds.Server
			if xdsListen != "" {
				if xl, err = net.Listen("tcp", xdsListen); err != nil {
					_ = ln.Close()
					return usagef("--xds-listen %q: %v", xdsListen, err)
				}
				if xs, err = xds.NewServer(xds.Options{Logger: cfg.Logger, Registerer: srv.Registerer(), TLS: xdsCfg}); err != nil {
					_ = ln.Close()
					_ = xl.Close()
					return usageError{err}
				}
			}
			var watcher *discovery.KubeWatcher
			if svc != "" {
				client, err := discovery.NewClient(kubeconfig)
				if err == nil {
					watcher, err = discovery.NewKubeWatcher(client, ns, svc, k8sPort, func(ts []discovery.Target) {
						if err := srv.SetDiscovered(discoveredBackends(ts)); err != nil {
							cfg.Logger.Error("discovered backends", "err", err)
						}
					})
				}
				if err != nil {
					_ = ln.Close()
					if xl != nil {
						_ = xl.Close()
					}
					return usageError{fmt.Errorf("--k8s-service: %w", err)}
				}
				watcher.SetLogger(cfg.Logger)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			if err := startPprof(ctx, pprofAddr, cmd.ErrOrStderr(), pprofCfg); err != nil {
				_ = ln.Close()
				if xl != nil {
					_ = xl.Close()
				}
				if local != nil {
					local.close()
				}
				return err
			}
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error { srv.Run(gctx); return nil })
			if local != nil {
				g.Go(func() error { return local.run(gctx) })
			}
			if xs != nil {
				g.Go(func() error { return xs.Serve(gctx, xl) })
				g.Go(func() error { exportXDS(gctx, srv, xs); return nil })
			}
			if watcher != nil {
				g.Go(func() error { return watcher.Run(gctx) })
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s://%s\n", sec.scheme(), ln.Addr())
			err = serveHandler(gctx, ln, srv.Handler(), sec.options("router", tlsCfg, cfg.Logger))
			srv.Close()
			cancel()
			if werr := g.Wait(); werr != nil && !errors.Is(werr, context.Canceled) && err == nil {
				err = failure{werr}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.BoolVar(&cfg.HTTP2, "http2", cfg.HTTP2, "reach gateways over HTTP/2 without TLS (h2c: many streams on one connection); HTTP/1.1 for backends that do not speak it, and with --http2=false")
	// --link was the private multiplexed protocol HTTP/2 replaced: it now
	// sets --http2, with a note to say so.
	f.BoolVar(&cfg.HTTP2, "link", cfg.HTTP2, "deprecated: use --http2")
	_ = f.MarkDeprecated("link", "the router-gateway link is now HTTP/2; use --http2 (or --http2=false for HTTP/1.1)")
	f.StringVar(&cfg.ID, "id", cfg.ID, "this replica's name, sent to gateways")
	f.StringVar(&cfg.Policy, "policy", cfg.Policy, "placement policy ("+strings.Join(policy.NewRegistry().Names(), ", ")+")")
	f.StringVar(&poolsFile, "pools", "", "YAML file of pools, as a fleet file's pools section lists them (name, max_tokens, models, backends by gateway id): each request is placed in the pool its model, then its length, picks (docs/live-fleet.md)")
	f.StringVar(&pressureFile, "pressure", "", "YAML file of the pressure policy's scoring and stickiness: weights, norm, projection, sticky, as a fleet file's pressure section holds them (docs/pressure.md)")
	f.StringVar(&keyFile, "hmac-key-file", "", "file of HMAC keys, one \"ROLE KEY-ID SECRET\" line each (docs/security.md): checks gateways' stats and operators' calls, signs requests to gateways")
	addSecureFlags(f, &sec, true)
	f.StringVar(&apiKeys, "api-keys", "", "file of client API keys, one per line (the key, or sha256:HEX of it)")
	f.BoolVar(&cfg.OpenInfo, "open-info", false, "serve /metrics and /v1/stargate/backends without an API key (scrapers on a private network)")
	f.BoolVar(&cfg.ExposeBackend, "expose-backend", false, "name the backend that answered in X-Stargate-Backend (experiments, debugging)")
	f.StringArrayVar(&backends, "backend", nil, "static backend NAME=URL[@CAPACITY] (repeatable)")
	f.IntVar(&cfg.MaxAttempts, "max-attempts", cfg.MaxAttempts, "backends one request may try before its first byte")
	f.DurationVar(&cfg.Liveness.HeartbeatTTL, "heartbeat-ttl", cfg.Liveness.HeartbeatTTL, "fail a backend whose last stats message or heartbeat is older than this (0: never; the Solyx AI Grid paper uses 500ms with 500 ms heartbeats)")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of randomized policies")
	f.StringVar(&pprofAddr, "pprof", "", pprofFlagUsage)
	f.StringVar(&xdsListen, "xds-listen", "", "serve the backends and their policy weights over xDS (ADS) for Envoy and gRPC on this address")
	f.StringVar(&k8sService, "k8s-service", "", "learn gateways from the EndpointSlices of this Kubernetes Service (NAMESPACE/NAME)")
	f.StringVar(&k8sPort, "k8s-port", "http", "with --k8s-service: the Service port's name or number")
	f.StringVar(&kubeconfig, "kubeconfig", "", "with --k8s-service: a kubeconfig file (default: the pod's service account)")
	gatewayFlags(f, &gcfg, "gateway-", "gateway in this process: ")
	slotModeFlag(f, &slotMode, "gateway-", "gateway in this process: ")
	f.BoolVar(&cfg.Console, "console", false, "serve the operator console on GET /console (docs/console.md)")
	f.StringVar(&gatewayListen, "gateway-listen", "", "gateway in this process: address other routers reach it on (default: only this router, in memory)")
	f.BoolVar(&verbose, "verbose", false, "log debug messages")
	return cmd
}

// exportXDS pushes the router's backends and weights to the xDS server
// whenever they may have changed (the server coalesces and skips small
// weight moves).
func exportXDS(ctx context.Context, srv *routerd.Server, xs *xds.Server) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		xs.Update(xdsEndpoints(srv.Backends()))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// xdsEndpoints maps the router's backends to xDS endpoints: weights at
// least 1, and a backend that must get no traffic marked, never weighted 0.
func xdsEndpoints(bs []routerd.BackendInfo) []xds.Endpoint {
	out := make([]xds.Endpoint, 0, len(bs))
	for _, b := range bs {
		u, err := url.Parse(b.URL)
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := 80
		if p := u.Port(); p != "" {
			port, _ = strconv.Atoi(p)
		} else if u.Scheme == "https" {
			port = 443
		}
		health := xds.Healthy
		switch {
		case b.State == "draining" || b.State == "terminated":
			health = xds.Draining
		case b.State != "ready" || !b.Eligible:
			health = xds.Unhealthy
		}
		out = append(out, xds.Endpoint{ID: b.Name, Region: b.Region, Host: u.Hostname(), Port: uint32(port),
			Weight: uint32(max(b.Weight, 1)), Health: health})
	}
	return out
}

// discoveredBackends turns Kubernetes targets into router backends.
func discoveredBackends(ts []discovery.Target) []routerd.Discovered {
	out := make([]routerd.Discovered, len(ts))
	for i, t := range ts {
		out[i] = routerd.Discovered{Name: t.Name, URL: "http://" + t.Addr, Ready: t.Ready}
	}
	return out
}

func parseStaticBackend(s string) (routerd.StaticBackend, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return routerd.StaticBackend{}, fmt.Errorf("--backend %q: want NAME=URL[@CAPACITY]", s)
	}
	b := routerd.StaticBackend{Name: name, URL: rest, Capacity: 25}
	if u, c, ok := strings.Cut(rest, "@"); ok {
		if _, err := fmt.Sscanf(c, "%d", &b.Capacity); err != nil || b.Capacity < 1 {
			return b, fmt.Errorf("--backend %q: capacity %q must be a whole number >= 1", s, c)
		}
		b.URL = u
	}
	return b, nil
}

func newFleetCmd() *cobra.Command {
	var fleetName, pol, pprofAddr string
	var ftls fleetTLSFlags
	var routers int
	scale := 1.0
	var seed uint64
	var verbose bool
	var engineTransport gatewayd.EngineTransport
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Run a whole live fleet (engines, gateways, routers) in this process on loopback",
		Long: `Start one mock engine and one gateway per backend and the routers of every
region, each a real HTTP server on 127.0.0.1, with the regions' latencies
injected in-process. The first output line lists the router URLs. The default
is the small fleet (two backends of 1 and 2 GPUs, one router). Ctrl-C stops it.`,
		Example: `  stargate fleet
  stargate fleet --fleet examples/small.yaml --policy least-request`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := policy.NewRegistry()
			fl, err := config.Load(fleetName)
			if err != nil {
				return usageError{err}
			}
			scfg, err := fl.SimConfig(config.Run{Policy: pol, RPS: 1, Seed: seed, Warmup: time.Second, Measure: time.Second}, reg)
			if err != nil {
				return usageError{err}
			}
			if scale != 1 {
				if err := study.ScaleConfig(&scfg, scale); err != nil {
					return usagef("--scale: %v", err)
				}
			}
			log := logger(cmd.ErrOrStderr(), verbose)
			fleetTLS, err := ftls.build(log)
			if err != nil {
				return err
			}
			var pprofCfg *tls.Config
			if fleetTLS != nil {
				pprofCfg = fleetTLS.Server
			}
			ctx := cmd.Context()
			if err := startPprof(ctx, pprofAddr, cmd.ErrOrStderr(), pprofCfg); err != nil {
				return err
			}
			f, err := fleet.Start(ctx, scfg, reg, fleet.Options{RoutersPerRegion: routers, Seed: seed, Logger: log, TLS: fleetTLS,
				Pools: routerPools(fl.Pools), EngineTransport: engineTransport})
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return failure{err}
			}
			defer f.Stop()
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(f.RouterURLs, ","))
			gpus := 0
			for _, b := range scfg.Backends {
				gpus += b.Workers
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "fleet %s: %d backends, %d GPUs, %d routers, policy %s; Ctrl-C stops it\n", fl.Name, len(f.Gateways), gpus, len(f.Routers), pol)
			<-ctx.Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&fleetName, "fleet", "small", "fleet: a built-in name ("+strings.Join(config.PresetNames(), ", ")+") or a fleet file")
	f.StringVar(&pol, "policy", "pulsar-waw", "placement policy ("+strings.Join(policy.NewRegistry().Names(), ", ")+")")
	f.IntVar(&routers, "routers-per-region", 0, "routers in each region (0: the fleet's own count)")
	f.Float64Var(&scale, "scale", scale, "fraction of every backend's GPUs (at least 1; one router per region below 1), as the live study's --scale")
	f.StringVar(&pprofAddr, "pprof", "", pprofFlagUsage)
	ftls.add(f)
	f.Uint64Var(&seed, "seed", 1, "seed of the engines' text and the policies")
	f.BoolVar(&verbose, "verbose", false, "log the services' messages")
	f.Var(&engineTransport, "engine-transport", engineTransportUsage)
	return cmd
}

func newDriveCmd() *cobra.Command {
	var targets, fleetName, out, className string
	cfg := drive.Config{Model: engined.DefaultModel}
	cmd := &cobra.Command{
		Use:   "drive",
		Short: "Drive routers with growing multi-turn sessions over HTTP and measure them",
		Long: `Play the workload's growing sessions against the routers in --target, with
the client's SLO, timeout and retry rules, and print the measured window's
summary as JSON (the fields of stargate sim). With --out, write
records.ndjson and summary.json there. The workload and client settings come
from --fleet (default: the routing study's).

--class replaces the sessions with a workload class's open loop at --rps
requests/s (classes: ` + strings.Join(workload.ClassNames(), ", ") + `);
--clients N with a closed loop of N clients. With --cooldown the run goes on
past the window and measures the turns that started in it.`,
		Example: `  stargate drive --target http://127.0.0.1:8080 --rps 2 --warmup 10s --measure 30s
  stargate drive --target http://127.0.0.1:8080 --class baseline_mixed --rps 5 --cooldown 10s
  stargate drive --target http://127.0.0.1:8080 --clients 16 --measure 20s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl, err := config.Load(fleetName)
			if err != nil {
				return usageError{err}
			}
			cfg.Targets = splitList(targets)
			cfg.Workload, cfg.Client = fl.Workload, fl.Client
			if className != "" {
				if cfg.Class, err = workload.ClassByName(className); err != nil {
					return usageError{err}
				}
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			total := cfg.Warmup + cfg.Measure + cfg.Cooldown
			if cfg.Class != nil {
				total += cfg.Class.Lead
			}
			errw := cmd.ErrOrStderr()
			cfg.Progress = func(el time.Duration) {
				fmt.Fprintf(errw, "\rdriving: %3.0f%% (%v of %v)", 100*el.Seconds()/total.Seconds(), el.Round(time.Second), total)
			}
			res, err := drive.Run(cmd.Context(), cfg)
			fmt.Fprintln(errw)
			if err != nil {
				return failure{err}
			}
			if out != "" {
				if err := os.MkdirAll(out, 0o755); err != nil {
					return failure{err}
				}
				if err := study.WriteFile(out, "records.ndjson", func(w io.Writer) error { return metrics.WriteNDJSON(w, res.Records) }); err != nil {
					return failure{err}
				}
				if err := study.WriteFile(out, "summary.json", func(w io.Writer) error { return writeIndented(w, res.Summary) }); err != nil {
					return failure{err}
				}
			}
			return writeIndented(cmd.OutOrStdout(), res.Summary)
		},
	}
	f := cmd.Flags()
	f.StringVar(&targets, "target", "", "router URLs, comma separated")
	f.Float64Var(&cfg.RPS, "rps", 2, "nominal request rate (sessions arrive at rps / mean turns)")
	f.DurationVar(&cfg.Warmup, "warmup", 10*time.Second, "warm-up before the measured window")
	f.DurationVar(&cfg.Measure, "measure", 30*time.Second, "length of the measured window")
	f.DurationVar(&cfg.Cooldown, "cooldown", 0, "time driven after the window; the turns started in the window are then measured")
	f.StringVar(&className, "class", "", "workload class whose open loop replaces the sessions")
	f.IntVar(&cfg.Clients, "clients", 0, "closed loop of this many clients instead of arrivals at --rps")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the sessions")
	f.StringVar(&out, "out", "", "directory for records.ndjson and summary.json")
	f.StringVar(&fleetName, "fleet", "hetero", "fleet whose workload and client settings to use (built-in or file)")
	f.StringVar(&cfg.Model, "model", cfg.Model, "model name to request")
	f.StringVar(&cfg.APIKey, "api-key", "", "API key sent as Authorization: Bearer")
	return cmd
}

func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// dialable is the address a process reaches its own listener at: the
// listener's, with an unspecified host (0.0.0.0, ::) replaced by loopback,
// so that a certificate check names a host a certificate can carry.
func dialable(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok || !t.IP.IsUnspecified() {
		return a.String()
	}
	ip := net.IPv4(127, 0, 0, 1)
	if t.IP.To4() == nil {
		ip = net.IPv6loopback
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(t.Port))
}
