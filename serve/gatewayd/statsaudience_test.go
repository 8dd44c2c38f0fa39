package gatewayd

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
)

// replicas are router replicas behind one address (a Kubernetes Service):
// the one answering is current; each checks the gateway's stats for itself.
type replicas struct {
	mu       sync.Mutex
	current  int
	v        []*auth.Verifier
	accepted []int
	audience map[string]bool // the audiences of accepted messages
	refused  int
}

func (rs *replicas) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	v := rs.v[rs.current]
	name := v.Self()[len("router/"):]
	w.Header().Set(wire.HeaderRouter, name)
	_, msg, err := v.Verify(r, 1<<20, auth.RoleGateway)
	if err != nil {
		rs.refused++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	rs.accepted[rs.current]++
	rs.audience[msg.Audience] = true
	writeJSON(w, http.StatusOK, wire.StatsReply{Router: name})
}

func (rs *replicas) counts() (accepted []int, refused int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]int(nil), rs.accepted...), rs.refused
}

// TestSecurityStatsSignedPerReplica: a gateway signs each stats message for
// the router replica it reaches ("router/ID"), never for the whole service,
// learning the replica from its answers: one refusal at first contact and
// one when the address starts reaching another replica, then accepted.
func TestSecurityStatsSignedPerReplica(t *testing.T) {
	rs := &replicas{v: []*auth.Verifier{auth.NewVerifier("router/r1", auth.DefaultMaxSkew, testKey),
		auth.NewVerifier("router/r2", auth.DefaultMaxSkew, testKey)}, accepted: make([]int, 2), audience: map[string]bool{}}
	srv := httptest.NewServer(rs)
	t.Cleanup(srv.Close)
	startGateway(t, poisonEngine(t), func(c *Config) {
		c.Routers, c.Advertise = []string{srv.URL}, "http://127.0.0.1:1"
		c.Admission.HeartbeatInterval = 20 * time.Millisecond
	})
	poll.Until(t, 10*time.Second, "two stats messages at r1", func() bool { a, _ := rs.counts(); return a[0] >= 2 })
	rs.mu.Lock()
	rs.current = 1
	rs.mu.Unlock()
	poll.Until(t, 10*time.Second, "two stats messages at r2", func() bool { a, _ := rs.counts(); return a[1] >= 2 })
	_, refused := rs.counts()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.audience) != 2 || !rs.audience["router/r1"] || !rs.audience["router/r2"] {
		t.Fatalf("accepted stats signed for %v, want router/r1 and router/r2 only", rs.audience)
	}
	if refused < 1 || refused > 2 {
		t.Fatalf("%d stats messages refused; want one at first contact and one after the switch at most", refused)
	}
}
