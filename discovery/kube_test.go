package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	fakev1 "k8s.io/client-go/kubernetes/typed/discovery/v1/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ptr[T any](v T) *T { return &v }

// fakeClient is client-go's fake discovery/v1 client over an object
// tracker holding objs: the fake clientset's wiring for the one API group
// the watcher uses.
func fakeClient(t *testing.T, objs ...runtime.Object) (*fakeDiscovery, clienttesting.ObjectTracker) {
	t.Helper()
	sch := runtime.NewScheme()
	if err := discoveryv1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	tracker := clienttesting.NewObjectTracker(sch, serializer.NewCodecFactory(sch).UniversalDecoder())
	for _, o := range objs {
		if err := tracker.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	f := &clienttesting.Fake{}
	f.AddReactor("*", "*", clienttesting.ObjectReaction(tracker))
	return &fakeDiscovery{&fakev1.FakeDiscoveryV1{Fake: f}}, tracker
}

// fakeDiscovery tells the informer, as the fake clientset does, that it
// cannot stream an initial list over a watch.
type fakeDiscovery struct{ *fakev1.FakeDiscoveryV1 }

func (fakeDiscovery) IsWatchListSemanticsUnSupported() bool { return true }

type ep struct {
	ip    string
	ready *bool
	pod   string
}

func slice(ns, name, service string, ports map[string]int32, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for n, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr(n), Port: ptr(p)})
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.pod != "" {
			x.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.pod}
		}
		s.Endpoints = append(s.Endpoints, x)
	}
	return s
}

var gwPorts = map[string]int32{"http": 9000, "metrics": 9100}

// watcher runs a KubeWatcher on a fake clientset holding objs and returns
// the clientset and a channel of its reports. The fake clientset cannot
// replay writes made between the informer's list and its watch, so the
// function returns only once the watch is open.
func watcher(t *testing.T, port string, objs ...*discoveryv1.EndpointSlice) (*fakeDiscovery, <-chan []Target) {
	t.Helper()
	var rs []runtime.Object
	for _, o := range objs {
		rs = append(rs, o)
	}
	client, tracker := fakeClient(t, rs...)
	watching := make(chan struct{})
	client.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		close(watching)
		return true, w, nil
	})
	reports := make(chan []Target, 16)
	w, err := NewKubeWatcher(client, "stargate", "gateway", port, func(ts []Target) { reports <- ts })
	if err != nil {
		t.Fatal(err)
	}
	w.SetLogger(slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer never opened its watch")
	}
	return client, reports
}

func next(t *testing.T, reports <-chan []Target) []Target {
	t.Helper()
	select {
	case ts := <-reports:
		return ts
	case <-time.After(10 * time.Second):
		t.Fatal("no report")
		return nil
	}
}

func TestKubeWatcher(t *testing.T) {
	ctx := context.Background()
	client, reports := watcher(t, "http",
		slice("stargate", "gateway-abc", "gateway", gwPorts,
			ep{ip: "10.0.0.1", pod: "gateway-0"},
			ep{ip: "10.0.0.2", ready: ptr(false), pod: "gateway-1"}),
		// Another Service's slice and another namespace's: ignored.
		slice("stargate", "engine-abc", "engine", map[string]int32{"http": 8000}, ep{ip: "10.9.0.1"}),
		slice("other", "gateway-xyz", "gateway", gwPorts, ep{ip: "10.8.0.1"}),
	)
	want := []Target{
		{Addr: "10.0.0.1:9000", Ready: true, Name: "gateway-0"},
		{Addr: "10.0.0.2:9000", Ready: false, Name: "gateway-1"},
	}
	if got := next(t, reports); !reflect.DeepEqual(got, want) {
		t.Fatalf("first report %+v, want %+v", got, want)
	}
	es := client.EndpointSlices("stargate")

	// A second slice of the Service adds its endpoints.
	if _, err := es.Create(ctx, slice("stargate", "gateway-def", "gateway", gwPorts, ep{ip: "10.0.1.1", ready: ptr(true), pod: "gateway-2"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = append(want, Target{Addr: "10.0.1.1:9000", Ready: true, Name: "gateway-2"})
	if got := next(t, reports); !reflect.DeepEqual(got, want) {
		t.Fatalf("after add %+v, want %+v", got, want)
	}

	// gateway-1 becomes ready.
	if _, err := es.Update(ctx, slice("stargate", "gateway-abc", "gateway", gwPorts,
		ep{ip: "10.0.0.1", pod: "gateway-0"}, ep{ip: "10.0.0.2", ready: ptr(true), pod: "gateway-1"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want[1].Ready = true
	if got := next(t, reports); !reflect.DeepEqual(got, want) {
		t.Fatalf("after ready %+v, want %+v", got, want)
	}

	// A change elsewhere (another Service) reports nothing; the removal of
	// the first slice does.
	if _, err := es.Create(ctx, slice("stargate", "engine-def", "engine", map[string]int32{"http": 8000}, ep{ip: "10.9.0.2"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := es.Delete(ctx, "gateway-abc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want = want[2:]
	if got := next(t, reports); !reflect.DeepEqual(got, want) {
		t.Fatalf("after delete %+v, want %+v", got, want)
	}
	select {
	case extra := <-reports:
		t.Errorf("unexpected report %+v", extra)
	default:
	}
}

func TestKubeWatcherPorts(t *testing.T) {
	tests := []struct {
		port string
		want []Target
	}{
		{"http", []Target{{Addr: "10.0.0.1:9000", Ready: true, Name: "10.0.0.1"}}},
		{"9100", []Target{{Addr: "10.0.0.1:9100", Ready: true, Name: "10.0.0.1"}}},
		{"grpc", []Target{}},
		{"", []Target{}}, // two ports and none chosen
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("port %q", tt.port), func(t *testing.T) {
			_, reports := watcher(t, tt.port, slice("stargate", "gateway-abc", "gateway", gwPorts, ep{ip: "10.0.0.1"}))
			if got := next(t, reports); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("targets %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("single port, none chosen", func(t *testing.T) {
		_, reports := watcher(t, "", slice("stargate", "gateway-abc", "gateway", map[string]int32{"": 9000}, ep{ip: "10.0.0.1"}))
		want := []Target{{Addr: "10.0.0.1:9000", Ready: true, Name: "10.0.0.1"}}
		if got := next(t, reports); !reflect.DeepEqual(got, want) {
			t.Errorf("targets %+v, want %+v", got, want)
		}
	})
}

func TestNewKubeWatcherRejects(t *testing.T) {
	client, _ := fakeClient(t)
	f := func([]Target) {}
	for _, c := range []struct {
		ns, svc string
		fn      func([]Target)
	}{{"", "gateway", f}, {"stargate", "", f}, {"stargate", "gateway", nil}} {
		if _, err := NewKubeWatcher(client, c.ns, c.svc, "http", c.fn); err == nil {
			t.Errorf("NewKubeWatcher(%q, %q) accepted", c.ns, c.svc)
		}
	}
	if _, err := NewKubeWatcher(nil, "a", "b", "", f); err == nil {
		t.Error("nil client accepted")
	}
}

func TestNewClientFromKubeconfig(t *testing.T) {
	if _, err := NewClient(t.TempDir() + "/missing"); err == nil {
		t.Error("a missing kubeconfig was accepted")
	}
	// Outside a cluster there is no service account.
	if _, err := NewClient(""); err == nil {
		t.Skip("running inside a cluster")
	}
}
