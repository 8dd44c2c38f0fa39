package routerd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
	rcore "github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
	"github.com/stargate-llm/stargate/telemetry"
)

// TestBackendsJSONNamesAndUnits reads GET /v1/stargate/backends as any
// client would: every backend has an id, the pressures are an object of the
// eleven signals by name, times are seconds (no nanoseconds anywhere), and
// every field name says its unit or is a name, flag or count.
func TestBackendsJSONNamesAndUnits(t *testing.T) {
	url := startRouter(t, func(c *Config) { c.Policy = "pulsar-waw" }, &echoBackend{}, &echoBackend{})
	time.Sleep(700 * time.Millisecond) // a probe round: an RTT to show
	resp, err := http.Get(url + "/v1/stargate/backends")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	bs, _ := v["backends"].([]any)
	if len(bs) != 2 {
		t.Fatalf("backends %s", raw)
	}
	for _, x := range bs {
		b := x.(map[string]any)
		if b["id"] != b["name"] || b["id"] == "" {
			t.Errorf("id %v, name %v: want the stable name", b["id"], b["name"])
		}
		p, ok := b["pressures"].(map[string]any)
		if !ok || len(p) != int(telemetry.NumSignals) {
			t.Fatalf("pressures %v: want an object of %d signals", b["pressures"], telemetry.NumSignals)
		}
		for s := range telemetry.NumSignals {
			if _, ok := p[s.String()]; !ok {
				t.Errorf("pressures lack %q", s)
			}
		}
		if rtt := b["rtt_seconds"].(float64); rtt <= 0 || rtt > 1 {
			t.Errorf("rtt_seconds %v: want a loopback round trip in seconds", rtt)
		}
		for k, val := range b {
			if strings.HasSuffix(k, "_ns") || k == "status" || k == "stats" || k == "policy_weight" {
				t.Errorf("field %q is the old unlabelled shape", k)
			}
			if _, isNum := val.(float64); isNum && !hasUnit(k) {
				t.Errorf("numeric field %q names no unit", k)
			}
		}
	}
	w, ok := v["pressure_weights"].(map[string]any)
	if !ok || w["errors"] != policy.DefaultPressureParams().Weights[telemetry.SigErrors] {
		t.Errorf("pressure_weights %v", v["pressure_weights"])
	}
}

// hasUnit reports whether a numeric field's name carries its unit (or is a
// count or an integer policy weight).
func hasUnit(k string) bool {
	for _, u := range []string{"_seconds", "_ratio", "_tokens", "_per_second", "_requests", "_total", "_celsius", "_mhz", "workers"} {
		if strings.HasSuffix(k, u) || k == u {
			return true
		}
	}
	return k == "weight" || k == "rank"
}

// TestIneligibleReasons maps the router's view of a backend to the reasons
// it takes nothing.
func TestIneligibleReasons(t *testing.T) {
	ttl := 1500 * time.Millisecond
	for _, c := range []struct {
		name string
		b    BackendInfo
		want []string
	}{
		{"ready", BackendInfo{State: "ready", Eligible: true, AgeS: 0.2}, []string{}},
		{"drained", BackendInfo{State: "draining", Status: statusDrained(), AgeS: 0.2}, []string{WhyDrained}},
		{"failed and silent", BackendInfo{State: "failed", AgeS: 3}, []string{WhyFailed, WhyStaleStats}},
		{"static backends send no stats", BackendInfo{State: "ready", Static: true, Eligible: true, AgeS: 30}, []string{}},
		{"refused", BackendInfo{State: "ready", Refused: true, AgeS: 0.2}, []string{WhyRefused}},
		{"all quarantined", BackendInfo{State: "ready", AgeS: 0.1, Stats: wire.Stats{Workers: 2, Quarantined: 2}}, []string{WhyAllQuarantined}},
		{"some quarantined, still eligible", BackendInfo{State: "ready", Eligible: true, AgeS: 0.1, Stats: wire.Stats{Workers: 2, Quarantined: 1}}, []string{}},
		{"full", BackendInfo{State: "ready", AgeS: 0.1}, []string{WhyNoCapacity}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ineligible(&c.b, ttl); !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func statusDrained() rcore.BackendStatus { return rcore.BackendStatus{Drained: true} }

// TestDispatchShare divides the dispatches of a window by backend.
func TestDispatchShare(t *testing.T) {
	pts := []consolePoint{{Dispatches: map[string]uint64{"a": 3, "b": 1}}, {Dispatches: map[string]uint64{"a": 3, "b": 1, "c": 0}}}
	got := dispatchShare(pts)
	if got["a"] != 0.75 || got["b"] != 0.25 || got["c"] != 0 || len(got) != 3 {
		t.Errorf("shares %v", got)
	}
	if got := dispatchShare([]consolePoint{{Dispatches: map[string]uint64{"a": 0}}}); got["a"] != 0 {
		t.Errorf("no dispatches: %v", got)
	}
}

// TestEventRingBounded keeps the newest events only, in order.
func TestEventRingBounded(t *testing.T) {
	var r eventRing
	for i := range consoleEvents + 44 {
		r.add("a", EventState, "event %d", i)
	}
	got := r.latest(consoleEvents * 2)
	if len(got) != consoleEvents || got[len(got)-1].Seq != consoleEvents+44 || got[0].Seq != 45 {
		t.Fatalf("%d events, first %d, last %d", len(got), got[0].Seq, got[len(got)-1].Seq)
	}
	if last := r.latest(3); len(last) != 3 || last[2].Text != fmt.Sprintf("event %d", consoleEvents+43) {
		t.Errorf("latest 3: %+v", last)
	}
}

// TestConsoleOffByDefault: without Config.Console there is no page.
func TestConsoleOffByDefault(t *testing.T) {
	url := startRouter(t, nil, &echoBackend{})
	for _, p := range []string{"/console", "/console/events"} {
		resp, err := http.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404 without --console", p, resp.StatusCode)
		}
	}
}

// TestConsolePageAndEvents serves the page (self-contained, with the
// report's palette) and streams updates: an operator's drain shows as the
// backend's state and as an event.
func TestConsolePageAndEvents(t *testing.T) {
	key := auth.RandomKey("ops")
	url, _ := startRouterWith(t, func(c *Config) { c.Console, c.Key = true, key }, nil, &echoBackend{}, &echoBackend{})

	resp, err := http.Get(url + "/console")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "#0072B2") || strings.Contains(string(page), "/*PALETTE") {
		t.Fatalf("page: status %d, palette missing or not filled in", resp.StatusCode)
	}
	for _, ref := range []string{"<script src", "<link", "@import", "url(", `src="http`, `href="http`, "fetch(\"http"} {
		if strings.Contains(string(page), ref) {
			t.Errorf("the page loads something from elsewhere (%s)", ref)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/console/events", nil)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if ct := stream.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := sseReader(stream.Body)
	if name, _ := events(); name != "history" {
		t.Fatalf("first event %q, want history", name)
	}
	drained := false
	var last consoleUpdate
	for n := 0; ; n++ {
		name, data := events()
		if name == "" {
			t.Fatalf("stream ended after %d updates; last %+v", n, last)
		}
		if name != "update" {
			continue
		}
		last = consoleUpdate{}
		if err := json.Unmarshal([]byte(data), &last); err != nil {
			t.Fatal(err)
		}
		if len(last.Backends) != 2 || last.IntervalSeconds != ConsoleInterval.Seconds() {
			t.Fatalf("update %+v", last)
		}
		if !drained {
			sreq, _ := auth.NewSigner(key, "operator").NewRequest("router/router-1", http.MethodPost, url+"/admin/backends/a/drain", nil)
			sresp, err := http.DefaultClient.Do(sreq)
			if err != nil {
				t.Fatal(err)
			}
			sresp.Body.Close()
			if sresp.StatusCode != http.StatusOK {
				t.Fatalf("drain: %d", sresp.StatusCode)
			}
			drained = true
			continue
		}
		a := last.Backends[slices.IndexFunc(last.Backends, func(b AdminBackend) bool { return b.ID == "a" })]
		sawEvent := slices.ContainsFunc(last.Events, func(e ConsoleEvent) bool { return e.Backend == "a" && e.Kind == EventDrain })
		sawState := slices.ContainsFunc(last.Events, func(e ConsoleEvent) bool { return e.Backend == "a" && e.Kind == EventState })
		// An idle drained backend is terminated at once.
		if (a.State == "draining" || a.State == "terminated") && !a.Eligible && slices.Contains(a.Ineligible, WhyDrained) && sawEvent && sawState {
			return
		}
	}
}

// sseReader returns a function that reads the next event's name and data
// ("" at the end of the stream).
func sseReader(r io.Reader) func() (name, data string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	return func() (name, data string) {
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && name != "":
				return name, data
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data += line[len("data: "):]
			}
		}
		return "", ""
	}
}

// TestConsoleEventsFromStats feeds the console a gateway's stats as the
// stats handler does: its registration, a quarantine, a release, a restart
// and a new advertised limit become events, in order; stats that change
// nothing make none.
func TestConsoleEventsFromStats(t *testing.T) {
	r := &Server{con: newConsole()}
	b := &backend{name: "gw-a"}
	feed := func(m wire.Stats, registered, restarted bool) {
		m.Backend, m.Workers = "gw-a", 2
		r.noteStats(b, &m, registered, restarted)
		b.last = m
	}
	feed(wire.Stats{MaxModelLen: 4096}, true, false)
	feed(wire.Stats{MaxModelLen: 4096, Quarantined: 1}, false, false)
	feed(wire.Stats{MaxModelLen: 4096, Quarantined: 1}, false, false) // no change, no event
	feed(wire.Stats{MaxModelLen: 4096}, false, false)
	feed(wire.Stats{MaxModelLen: 4096}, false, true)
	feed(wire.Stats{MaxModelLen: 2048}, false, false)
	var kinds []string
	for _, e := range r.Events(100) {
		if e.Backend != "gw-a" || e.Text == "" {
			t.Errorf("event %+v", e)
		}
		kinds = append(kinds, e.Kind)
	}
	if want := []string{EventRegistered, EventQuarantine, EventRelease, EventRestarted, EventAdvertised}; !slices.Equal(kinds, want) {
		t.Errorf("events %q, want %q", kinds, want)
	}
}
