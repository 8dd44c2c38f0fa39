package engined

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/serve/openai"
)

// HeaderWorker names the worker a gateway chose for a request.
const HeaderWorker = "X-Stargate-Worker"

// FenceMessage is the JSON of a fence challenge and of its answer: the
// gateway's challenge (gateway.Challenge) going out, the engine's signed
// idle statement (gateway.IdleStatement) coming back.
type FenceMessage struct {
	Worker     int      `json:"worker"`
	Generation uint64   `json:"generation"`
	Nonce      [16]byte `json:"nonce"`
	Signature  [32]byte `json:"signature"`
}

// fence answers a gateway's idle fence for one worker: a signed statement
// that the worker holds nothing, at the challenge's generation and nonce.
func (s *Server) fence(w http.ResponseWriter, r *http.Request) {
	if len(s.cfg.Key.Secret) == 0 {
		openai.WriteError(w, http.StatusNotFound, "NotFoundError", "this engine has no fence key; start it with --hmac-key-file")
		return
	}
	var m FenceMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&m); err != nil {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", "fence body is not a JSON challenge: "+err.Error())
		return
	}
	c := gateway.Challenge(m)
	if !gateway.VerifyChallenge(s.cfg.Key.Secret, c) {
		openai.WriteError(w, http.StatusUnauthorized, "AuthenticationError", "the challenge's signature does not match this engine's fence key")
		return
	}
	if c.Worker < 0 || c.Worker >= s.cfg.GPUs {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("worker must be 0-%d, got %d", s.cfg.GPUs-1, c.Worker))
		return
	}
	if n := s.held(c.Worker); n > 0 {
		openai.WriteError(w, http.StatusConflict, "ConflictError", fmt.Sprintf("worker %d still holds %d requests; fence again when they end", c.Worker, n))
		return
	}
	openai.WriteJSON(w, http.StatusOK, FenceMessage(gateway.SignIdle(s.cfg.Key.Secret, c)))
}

// held is how many requests worker w runs or holds waiting.
func (s *Server) held(w int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(s.now())
	return s.cl.Worker(w).Load()
}
