package xds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// DefaultListenerPort is the port of Envoy's HTTP listener unless
// Options.ListenerPort says otherwise.
const DefaultListenerPort = 10000

// Options configure a Server. The zero value of every field takes the
// default named in its comment.
type Options struct {
	// ClusterName names the Cluster and its ClusterLoadAssignment
	// ("stargate-gateways").
	ClusterName string
	// RouteName names the RouteConfiguration ("stargate-route").
	RouteName string
	// ListenerName names Envoy's HTTP listener ("stargate-http"), which
	// listens on ListenerAddress ("0.0.0.0") port ListenerPort (10000).
	ListenerName    string
	ListenerAddress string
	ListenerPort    uint32
	// GRPCListenerName names the API listener of proxyless gRPC clients
	// ("stargate"): they dial "xds:///stargate".
	GRPCListenerName string
	// HashHeader is the request header whose value keys the ring hash
	// ("x-session-id"), so a session's turns reach the same backend.
	HashHeader string
	// RingSize is the ring hash's minimum ring size (4096). gRPC caps its
	// ring at 4096 entries unless GRPC_RING_HASH_CAP says otherwise.
	RingSize uint64
	// Threshold is the relative change of some healthy endpoint's traffic
	// share that makes a weight change worth a push (0.1 = 10%, the
	// default). Negative: every weight change is pushed. Changes of
	// membership, address and health are always pushed.
	Threshold float64
	// Window coalesces updates: a significant change is pushed Window after
	// it was first seen, with the latest endpoints by then (200 ms).
	// Negative: no coalescing.
	Window time.Duration
	// Logger receives the server's log (slog.Default()).
	Logger *slog.Logger
	// Registerer receives the server's metrics; nil registers none.
	Registerer prometheus.Registerer
	// TLS, if set, serves ADS over TLS (ALPN h2) with it: its certificate,
	// client-certificate checks and reloading (package tlsconf) as given.
	// nil serves plaintext, logged at WARN.
	TLS *tls.Config
}

func (o Options) withDefaults() Options {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.ClusterName, "stargate-gateways")
	def(&o.RouteName, "stargate-route")
	def(&o.ListenerName, "stargate-http")
	def(&o.ListenerAddress, "0.0.0.0")
	def(&o.GRPCListenerName, "stargate")
	def(&o.HashHeader, "x-session-id")
	o.HashHeader = strings.ToLower(o.HashHeader)
	if o.ListenerPort == 0 {
		o.ListenerPort = DefaultListenerPort
	}
	if o.RingSize == 0 {
		o.RingSize = 4096
	}
	switch {
	case o.Threshold == 0:
		o.Threshold = 0.1
	case o.Threshold < 0:
		o.Threshold = 0
	}
	switch {
	case o.Window == 0:
		o.Window = 200 * time.Millisecond
	case o.Window < 0:
		o.Window = 0
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Server exports the router's endpoints over the xDS aggregated discovery
// service (ADS). Update is safe for concurrent use, also before Serve and
// after it returns; Serve may be called once at a time.
type Server struct {
	opts   Options
	log    *slog.Logger
	cache  cachev3.SnapshotCache
	static staticResources
	boot   string
	m      metrics

	// now and afterFunc are the clock; tests replace them.
	now       func() time.Time
	afterFunc func(time.Duration, func())

	mu    sync.Mutex
	co    *Coalescer
	armed bool
	seq   uint64
}

type metrics struct {
	pushes, updates, nacks prometheus.Counter
	version, streams       prometheus.Gauge
	endpoints              *prometheus.GaugeVec
	// build is how long the latest push took to build its snapshots and
	// hand them to the cache (the Solyx AI Grid paper's xDS build time).
	build prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		pushes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stargate_xds_pushes_total",
			Help: "Snapshots pushed to xDS clients (weight changes past the threshold, coalesced).",
		}),
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stargate_xds_updates_total",
			Help: "Endpoint updates received from the router, pushed or not.",
		}),
		nacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stargate_xds_nacks_total",
			Help: "xDS responses a client rejected.",
		}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stargate_xds_snapshot_version",
			Help: "Sequence number of the latest snapshot (the endpoint version is <boot>-<sequence>).",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stargate_xds_streams",
			Help: "Open xDS streams.",
		}),
		endpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stargate_xds_endpoints",
			Help: "Endpoints in the latest snapshot, by health.",
		}, []string{"health"}),
		build: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stargate_xds_build_seconds",
			Help: "Time the latest push took to build its snapshots and set them in the cache.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.pushes, m.updates, m.nacks, m.version, m.streams, m.endpoints, m.build} {
		if err := reg.Register(c); err != nil {
			return metrics{}, fmt.Errorf("xds: register metrics: %w", err)
		}
	}
	return m, nil
}

// NewServer returns a Server with no endpoints. Clients that connect before
// the first push wait for it: a restarted control plane never hands Envoy an
// empty endpoint list in place of the one it holds.
func NewServer(opts Options) (*Server, error) {
	o := opts.withDefaults()
	// The boot id keeps versions unique across restarts: a client that
	// reconnects with the version it holds gets the new snapshot even when
	// the sequence number is the same.
	boot := strconv.FormatInt(time.Now().UnixNano(), 36)
	st, err := buildStatic(o, boot+"-static")
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &Server{
		opts:   o,
		log:    o.Logger.With("component", "xds"),
		cache:  cachev3.NewSnapshotCache(false, groupHash{}, slogAdapter{o.Logger.With("component", "xds-cache")}),
		static: st,
		boot:   boot,
		m:      m,
		co:     NewCoalescer(o.Threshold, o.Window),
		now:    time.Now,
		afterFunc: func(d time.Duration, f func()) {
			time.AfterFunc(d, f)
		},
	}, nil
}

// Update offers the router's current endpoints. Zero weights are read as 1;
// endpoints that cannot be exported are left out and logged. The push, if
// the change is significant, happens after the coalescing window.
func (s *Server) Update(eps []Endpoint) {
	norm, err := normalize(eps)
	if err != nil {
		s.log.Warn("xds update", "err", err)
	}
	s.m.updates.Inc()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if due, ok := s.co.Offer(now, norm); ok {
		s.armLocked(now, due)
	}
}

func (s *Server) armLocked(now, due time.Time) {
	if !s.armed {
		s.armed = true
		s.afterFunc(due.Sub(now), s.flush)
	}
}

// flush pushes the pending endpoints if they are due.
func (s *Server) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	now := s.now()
	eps, push := s.co.Flush(now)
	if !push {
		if due, ok := s.co.Pending(); ok {
			s.armLocked(now, due)
		}
		return
	}
	s.seq++
	version := s.boot + "-" + strconv.FormatUint(s.seq, 10)
	start := time.Now()
	snaps, err := buildSnapshots(s.static, s.opts.ClusterName, version, eps)
	if err != nil {
		// Clients keep the last snapshot pushed.
		s.log.Error("xds snapshot not pushed", "version", version, "err", err)
		return
	}
	for group, snap := range snaps {
		if err := s.cache.SetSnapshot(context.Background(), group, snap); err != nil {
			s.log.Error("xds snapshot not pushed", "group", group, "version", version, "err", err)
			return
		}
	}
	s.m.build.Set(time.Since(start).Seconds())
	count := map[Health]int{}
	for _, e := range eps {
		count[e.Health]++
	}
	for _, h := range []Health{Healthy, Draining, Unhealthy} {
		s.m.endpoints.WithLabelValues(h.String()).Set(float64(count[h]))
	}
	s.m.pushes.Inc()
	s.m.version.Set(float64(s.seq))
	s.log.Info("xds push", "version", version, "endpoints", len(eps), "healthy", count[Healthy])
}

// Version returns the version of the latest pushed ClusterLoadAssignment, or
// "" before the first push.
func (s *Server) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq == 0 {
		return ""
	}
	return s.boot + "-" + strconv.FormatUint(s.seq, 10)
}

// Serve serves ADS on lis until ctx ends, then closes every stream and
// returns nil. Clients keep the configuration they last accepted.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	opts := []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
	if s.opts.TLS != nil {
		cfg := s.opts.TLS.Clone()
		cfg.NextProtos = []string{"h2"} // gRPC's, whatever the HTTP listeners offer
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
		s.log.Info("xds serving ADS over TLS", "addr", lis.Addr().String(), "client_certs", cfg.ClientAuth.String())
	} else {
		s.log.Warn("xds serving ADS in plaintext: the backends' addresses cross the network unencrypted; give the router --tls-cert-file and --tls-private-key-file unless this is loopback or a test",
			"addr", lis.Addr().String())
	}
	gs := grpc.NewServer(opts...)
	srv := serverv3.NewServer(ctx, s.cache, s.callbacks())
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	select {
	case <-ctx.Done():
		// ADS streams never end by themselves: stop, not graceful stop.
		gs.Stop()
		if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("xds: serve ADS on %s: %w", lis.Addr(), err)
		}
		return nil
	case err := <-errc:
		gs.Stop()
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("xds: serve ADS on %s: %w", lis.Addr(), err)
		}
		return nil
	}
}

func (s *Server) callbacks() serverv3.CallbackFuncs {
	return serverv3.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, typeURL string) error {
			s.m.streams.Inc()
			s.log.Debug("xds stream open", "stream", id, "type", typeURL)
			return nil
		},
		StreamClosedFunc: func(id int64, node *corev3.Node) {
			s.m.streams.Dec()
			s.log.Debug("xds stream closed", "stream", id, "node", node.GetId())
		},
		StreamRequestFunc: func(id int64, req *discoveryv3.DiscoveryRequest) error {
			if d := req.GetErrorDetail(); d != nil {
				s.m.nacks.Inc()
				s.log.Warn("xds client rejected a response", "stream", id, "node", req.GetNode().GetId(),
					"type", req.GetTypeUrl(), "version", req.GetVersionInfo(), "err", d.GetMessage())
			}
			return nil
		},
	}
}

// groupHash puts gRPC clients in one group and every other client (Envoy) in
// the other.
type groupHash struct{}

func (groupHash) ID(node *corev3.Node) string {
	if strings.HasPrefix(node.GetUserAgentName(), "gRPC") {
		return groupGRPC
	}
	return groupEnvoy
}

// slogAdapter is go-control-plane's logger on slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Debugf(format string, args ...any) {
	if a.l.Enabled(context.Background(), slog.LevelDebug) {
		a.l.Debug(fmt.Sprintf(format, args...))
	}
}
func (a slogAdapter) Infof(format string, args ...any)  { a.l.Info(fmt.Sprintf(format, args...)) }
func (a slogAdapter) Warnf(format string, args ...any)  { a.l.Warn(fmt.Sprintf(format, args...)) }
func (a slogAdapter) Errorf(format string, args ...any) { a.l.Error(fmt.Sprintf(format, args...)) }
