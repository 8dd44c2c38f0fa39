package gatewayd

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	core "github.com/stargate-llm/stargate/gateway"
)

// probeEngines looks at each engine: its GET /health and whether its GET
// /v1/models lists a model. The backend serves while any engine does (the
// others' capacity is out of the stats already); the core's ObserveEngine
// turns the probe into Loading or Ready.
func (s *Server) probeEngines(ctx context.Context) core.EngineProbe {
	var best core.EngineProbe
	for _, base := range s.cfg.Engines {
		p := s.probeEngine(ctx, base)
		if p.Serving() {
			return p
		}
		if !best.Reachable || p.Healthy || p.ModelsListed {
			best = p
		}
	}
	return best
}

// probeEngine looks at one engine. Health passes on any answer but a
// server error (an engine without the endpoint answers 404 and is judged
// by its models alone).
func (s *Server) probeEngine(ctx context.Context, base string) core.EngineProbe {
	var p core.EngineProbe
	code, _, err := s.fetch(ctx, base+"/health", 1<<16)
	if err == nil {
		p.Reachable, p.Healthy = true, code < http.StatusInternalServerError
	}
	code, body, err := s.fetch(ctx, base+"/v1/models", 1<<20)
	if err != nil {
		return p
	}
	p.Reachable = true
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	p.ModelsListed = code == http.StatusOK && json.Unmarshal(body, &list) == nil && len(list.Data) > 0
	return p
}

// fetch GETs url within 2 s: its status and at most limit bytes of body.
func (s *Server) fetch(ctx context.Context, url string, limit int64) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	s.authorize(req.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp.StatusCode, body, err
}

// lookAtEngines probes the engines and hands the core what it found: at
// start, before the first scrape, so that a gateway beside an engine still
// loading reports Loading from its first stats.
func (s *Server) lookAtEngines(ctx context.Context) {
	p := s.probeEngines(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observeLifecycle(p)
}

// observeLifecycle hands the core the probe and wakes the requests it
// admits when the engine serves again. Called with mu held.
func (s *Server) observeLifecycle(p core.EngineProbe) {
	was := s.adm.Loading(s.now())
	s.admitBuf = s.adm.ObserveEngine(s.now(), p, s.admitBuf[:0])
	s.wakeAdmitted(s.admitBuf)
	switch now := s.adm.Loading(s.now()); {
	case now && !was:
		s.log.Warn("engine not serving: the backend reports Loading", "healthy", p.Healthy, "models_listed", p.ModelsListed, "reachable", p.Reachable)
	case !now && was:
		s.log.Info("engine serving: the backend reports Ready")
	}
}

// Loading reports whether the gateway reports its backend Loading now.
func (s *Server) Loading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adm != nil && s.adm.Loading(s.now())
}
