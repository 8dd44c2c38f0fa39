package routerd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/stargate-llm/stargate/internal/netsim"
)

// Hooks let an in-process caller (an experiment, a test) watch what a router
// does. Each is called synchronously, outside the router's lock for
// Dispatch and under it for Report: it must be quick, must not block and
// must not call back into the router. Nil hooks are skipped.
type Hooks struct {
	// Dispatch hears every attempt the router sends to a backend.
	Dispatch func(DispatchEvent)
	// Report hears every stats message or heartbeat a gateway sends.
	Report func(ReportEvent)
}

// DispatchEvent is one attempt sent to a backend.
type DispatchEvent struct {
	At      time.Time
	Router  string
	Backend string
	// Session is the request's session key (openai.SessionKey).
	Session uint64
	// Tokens is the request's prompt plus max_tokens.
	Tokens int
}

// ReportEvent is one gateway report the router took.
type ReportEvent struct {
	At      time.Time
	Router  string
	Backend string
	// Signals says whether the report carried telemetry signals; Hardware
	// whether those included the hardware (DCGM) ones.
	Signals, Hardware bool
}

// PathRequest is the body of POST /admin/backends/{name}/path: the extra
// delay on this router's path to the backend, both ways, as the simulator's
// path fault defines it (each message waits RTT/2 plus an exponential delay
// of mean Jitter). Zeros clear it.
type PathRequest struct {
	RTTms    float64 `json:"rtt_ms"`
	JitterMs float64 `json:"jitter_ms"`
}

// maxPathDelay bounds an injected path delay.
const maxPathDelay = time.Minute

// SetPath gives this router's path to backend name an extra round trip and
// jitter (fault injection by an operator; see PathRequest). The delay
// applies to the backend's URL host as it is now.
func (s *Server) SetPath(name string, rtt, jitter time.Duration) error {
	if rtt < 0 || jitter < 0 || rtt > maxPathDelay || jitter > maxPathDelay {
		return fmt.Errorf("router: path rtt and jitter must be in [0, %v], got %v and %v", maxPathDelay, rtt, jitter)
	}
	host, err := s.backendHost(name)
	if err != nil {
		return err
	}
	s.paths.SetPath(host, netsim.Path{OneWay: rtt / 2, Jitter: jitter, Exponential: true})
	s.log.Info("operator path fault", "backend", name, "rtt", rtt, "jitter", jitter)
	return nil
}

// adminPath serves POST /admin/backends/{name}/path, signed like the drain
// endpoints.
func (s *Server) adminPath(w http.ResponseWriter, r *http.Request) {
	body, ok := s.verifyAdmin(w, r)
	if !ok {
		return
	}
	var p PathRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		http.Error(w, `path body must be {"rtt_ms": N, "jitter_ms": N}: `+err.Error(), http.StatusBadRequest)
		return
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	if !(p.RTTms >= 0 && p.JitterMs >= 0 && ms(p.RTTms) <= maxPathDelay && ms(p.JitterMs) <= maxPathDelay) {
		http.Error(w, fmt.Sprintf("rtt_ms and jitter_ms must be in [0, %d]", maxPathDelay.Milliseconds()), http.StatusBadRequest)
		return
	}
	name := r.PathValue("name")
	if err := s.SetPath(name, ms(p.RTTms), ms(p.JitterMs)); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"backend": name, "rtt_ms": p.RTTms, "jitter_ms": p.JitterMs})
}

// Path returns the extra delay this router adds on its path to backend
// name (the zero Path if none, or if there is no such backend).
func (s *Server) Path(name string) netsim.Path {
	host, err := s.backendHost(name)
	if err != nil {
		return netsim.Path{}
	}
	return s.paths.Path(host)
}

// backendHost is the host of backend name's URL as it is now.
func (s *Server) backendHost(name string) (string, error) {
	u := ""
	for _, b := range s.table.Load().list {
		if b.name == name {
			u = b.url
		}
	}
	if u == "" {
		return "", fmt.Errorf("router: no backend %q", name)
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return "", fmt.Errorf("router: backend %q has no usable URL %q", name, u)
	}
	return pu.Host, nil
}
