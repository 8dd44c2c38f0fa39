package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typedv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	listersv1 "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// Target is one endpoint of the watched Service: a gateway.
type Target struct {
	// Addr is host:port.
	Addr string
	// Ready is the endpoint's ready condition (an absent condition counts
	// as ready, as the EndpointSlice API says).
	Ready bool
	// Name is the pod's name, or the endpoint's hostname, or Addr.
	Name string
}

// KubeWatcher watches the EndpointSlices of one Service and reports the
// Service's endpoints on the chosen port each time they change.
type KubeWatcher struct {
	client    typedv1.EndpointSlicesGetter
	namespace string
	service   string
	port      string
	onChange  func([]Target)
	log       *slog.Logger

	mu     sync.Mutex
	synced bool
	last   []Target
	lister listersv1.EndpointSliceLister
}

// NewKubeWatcher returns a watcher of the EndpointSlices of Service
// namespace/service (those labelled kubernetes.io/service-name=service).
// port is the name of the Service port whose number the targets use
// ("http"), or a number ("9000"), or "" when the slices have exactly one
// port. onChange receives the whole sorted target list after the first sync
// (even an empty one) and after every change; it is called from one
// goroutine at a time and must not block for long.
func NewKubeWatcher(client typedv1.EndpointSlicesGetter, namespace, service, port string, onChange func([]Target)) (*KubeWatcher, error) {
	switch {
	case client == nil:
		return nil, errors.New("discovery: no Kubernetes client")
	case namespace == "" || service == "":
		return nil, fmt.Errorf("discovery: namespace %q and service %q must both be set (NAMESPACE/NAME)", namespace, service)
	case onChange == nil:
		return nil, errors.New("discovery: no onChange function")
	}
	return &KubeWatcher{client: client, namespace: namespace, service: service, port: port, onChange: onChange,
		log: slog.Default().With("component", "discovery", "service", namespace+"/"+service)}, nil
}

// SetLogger sets the logger (slog.Default() otherwise). Call it before Run.
func (w *KubeWatcher) SetLogger(l *slog.Logger) {
	w.log = l.With("component", "discovery", "service", w.namespace+"/"+w.service)
}

// Run watches until ctx ends and returns nil then, or an error if the first
// list of EndpointSlices does not complete before ctx ends.
func (w *KubeWatcher) Run(ctx context.Context) error {
	selector := labels.Set{discoveryv1.LabelServiceName: w.service}.String()
	es := w.client.EndpointSlices(w.namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return es.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return es.Watch(ctx, o)
		},
	}
	// As client-go's generated informers do: a client that cannot stream
	// the initial list over a watch (a fake) says so.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, w.client), &discoveryv1.EndpointSlice{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	w.mu.Lock()
	w.lister = listersv1.NewEndpointSliceLister(inf.GetIndexer())
	w.mu.Unlock()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.refresh() },
		UpdateFunc: func(any, any) { w.refresh() },
		DeleteFunc: func(any) { w.refresh() },
	}); err != nil {
		return fmt.Errorf("discovery: watch %s/%s: %w", w.namespace, w.service, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); inf.Run(ctx.Done()) }()
	defer wg.Wait()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("discovery: the EndpointSlices of %s/%s never synced", w.namespace, w.service)
	}
	w.mu.Lock()
	w.synced = true
	w.mu.Unlock()
	w.refresh()
	<-ctx.Done()
	return nil
}

// refresh recomputes the targets from the informer's cache and reports them
// if they changed.
func (w *KubeWatcher) refresh() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.synced {
		return
	}
	all, err := w.lister.EndpointSlices(w.namespace).List(labels.Everything())
	if err != nil {
		w.log.Warn("list EndpointSlices", "err", err)
		return
	}
	targets := w.targets(all)
	if w.last != nil && slices.Equal(targets, w.last) {
		return
	}
	w.last = targets
	w.onChange(slices.Clone(targets))
}

// targets turns slices into sorted, de-duplicated targets. An address listed
// in two slices (as during a move between slices) is ready if either says
// so.
func (w *KubeWatcher) targets(all []*discoveryv1.EndpointSlice) []Target {
	byAddr := map[string]Target{}
	for _, s := range all {
		// The informer's list is filtered by label, but check: the cache
		// holds what the API server sent.
		if s.Labels[discoveryv1.LabelServiceName] != w.service || s.Namespace != w.namespace {
			continue
		}
		port, ok := w.pickPort(s)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			for _, a := range e.Addresses {
				t := Target{Addr: net.JoinHostPort(a, strconv.Itoa(int(port))), Ready: ready, Name: endpointName(e, a)}
				if old, ok := byAddr[t.Addr]; ok {
					t.Ready = t.Ready || old.Ready
				}
				byAddr[t.Addr] = t
			}
		}
	}
	out := make([]Target, 0, len(byAddr))
	for _, t := range byAddr {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Target) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}

// pickPort finds the watcher's port in a slice.
func (w *KubeWatcher) pickPort(s *discoveryv1.EndpointSlice) (int32, bool) {
	if w.port == "" {
		if len(s.Ports) == 1 && s.Ports[0].Port != nil {
			return *s.Ports[0].Port, true
		}
		w.log.Warn("EndpointSlice has several ports and no port was chosen; skipped", "slice", s.Name)
		return 0, false
	}
	for _, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		if (p.Name != nil && *p.Name == w.port) || strconv.Itoa(int(*p.Port)) == w.port {
			return *p.Port, true
		}
	}
	if len(s.Endpoints) > 0 {
		w.log.Warn("EndpointSlice has no such port; skipped", "slice", s.Name, "port", w.port)
	}
	return 0, false
}

func endpointName(e discoveryv1.Endpoint, addr string) string {
	switch {
	case e.TargetRef != nil && e.TargetRef.Name != "":
		return e.TargetRef.Name
	case e.Hostname != nil && *e.Hostname != "":
		return *e.Hostname
	}
	return addr
}

// NewClient returns a Kubernetes client from the kubeconfig file at path, or
// from the pod's service account when path is "" (in-cluster).
func NewClient(kubeconfig string) (typedv1.EndpointSlicesGetter, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("discovery: in-cluster Kubernetes config (outside a cluster, give a kubeconfig file): %w", err)
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("discovery: kubeconfig %q: %w", kubeconfig, err)
		}
	}
	c, err := typedv1.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery: Kubernetes client: %w", err)
	}
	return c, nil
}
