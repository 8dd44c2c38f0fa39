package routerd

import (
	"net/http"
	"testing"
)

// Outcome labels say what happened: a backend's 404 for a bad model name
// is the request's own fault, not a backend failure; gateways whose engines
// are unreachable (502) are not overload.
func TestOutcomeLabels(t *testing.T) {
	for _, tc := range []struct {
		status int
		client int
		reason string
		failed bool
	}{
		{http.StatusNotFound, http.StatusNotFound, ReasonNotFound, false},
		{http.StatusUnprocessableEntity, http.StatusUnprocessableEntity, ReasonBadRequest, false},
		{http.StatusForbidden, http.StatusForbidden, ReasonEngineAuth, false},
		{http.StatusBadGateway, http.StatusServiceUnavailable, ReasonEngineUnreachable, false},
		{http.StatusServiceUnavailable, http.StatusServiceUnavailable, ReasonOverloaded, false},
		{http.StatusInternalServerError, http.StatusInternalServerError, ReasonBackendStatus, true},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			url, srv := startRouterWith(t, nil, nil, &echoBackend{status: tc.status}, &echoBackend{status: tc.status})
			resp, text := call(t, url, `{"model":"no-such-model","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, nil)
			if resp.StatusCode != tc.client {
				t.Fatalf("client got %d %s, want %d", resp.StatusCode, text, tc.client)
			}
			c := srv.Counts()
			got := c.Rejected[tc.reason]
			if tc.failed {
				got = c.Failed[tc.reason]
			}
			if got != 1 || len(c.Failed)+len(c.Rejected) != 1 {
				t.Errorf("counts failed %v rejected %v: want one %s (failed %v)", c.Failed, c.Rejected, tc.reason, tc.failed)
			}
		})
	}
}
