package engined

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/stargate-llm/stargate/serve/openai"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/internal/mix"
)

var vocabulary = strings.Fields(`the a router gateway engine token cache fleet region session model
request stream batch prefill decode worker slot queue policy weight affinity capacity latency
signal pressure backend quorum fence lease permit ring band wait overflow`)

// word is output token i of a request: deterministic in seed and prompt.
func word(seed, prompt uint64, i int) string {
	x := mix.Mix64(seed ^ prompt ^ uint64(i)*0x9e3779b97f4a7c15)
	return vocabulary[x%uint64(len(vocabulary))] + " "
}

// complete serves one completion and counts how it ended: a request that
// never reached a worker is rejected with its status; one that did ends in
// finish.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	s.mu.Lock()
	s.counts.Accepted++
	s.mu.Unlock()
	rec := &statusWriter{ResponseWriter: w}
	if !s.handle(rec, r, chat) {
		s.mu.Lock()
		s.counts.End("status_"+strconv.Itoa(rec.status), false)
		s.mu.Unlock()
	}
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// handle serves a completion; it reports whether the request reached a worker.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, chat bool) (submitted bool) {
	arrived := time.Now()
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var req openai.Request
	raw, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			openai.WriteError(w, http.StatusRequestEntityTooLarge, "BadRequestError",
				fmt.Sprintf("request body is larger than %d bytes", s.cfg.MaxBodyBytes))
			return false
		}
		if s.vllm() {
			validationError(w, "json_invalid", "0", "JSON decode error", map[string]any{})
			return false
		}
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", "request body is not valid JSON: "+err.Error())
		return false
	}
	if s.vllm() && chat && len(req.Messages) == 0 {
		validationError(w, "missing", "'messages'", "Field required", json.RawMessage(raw))
		return false
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		openai.WriteError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return false
	}
	if req.StreamOptions != nil && !req.Stream {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", "stream_options is only allowed when stream is true")
		return false
	}
	if req.N != nil && *req.N != 1 {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", "n must be 1: this engine returns one choice")
		return false
	}
	prompt, lead, all, err := req.PromptTokens(chat)
	if err != nil {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return false
	}
	limit, fail, hang := s.faultsFor()
	if hang {
		select { // an injected hang: accept and never answer
		case <-r.Context().Done():
		case <-s.stopped:
		}
		return false
	}
	if fail {
		openai.WriteError(w, http.StatusInternalServerError, "InternalServerError", "injected engine failure")
		return false
	}
	maxTokens := min(s.cfg.DefaultMaxTokens, limit-prompt)
	for _, v := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if v != nil {
			maxTokens = *v
		}
	}
	if maxTokens < 1 {
		if req.MaxTokens == nil && req.MaxCompletionTokens == nil {
			maxTokens = 1 // let the length check below say what is wrong
		} else {
			openai.WriteError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("max_tokens must be at least 1, got %d", maxTokens))
			return false
		}
	}
	if maxTokens > limit-prompt { // not prompt+maxTokens: that can overflow
		s.contextError(w, limit, prompt, maxTokens, req.MaxTokens != nil || req.MaxCompletionTokens != nil)
		return false
	}
	worker := -1
	if h := r.Header.Get(HeaderWorker); h != "" && !s.vllm() {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 || n >= s.cfg.GPUs {
			openai.WriteError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("%s must be a worker index 0-%d, got %q", HeaderWorker, s.cfg.GPUs-1, h))
			return false
		}
		worker = n
	}
	id, st, err := s.submit(worker, openai.SessionKey(r.Header, req.User, lead), prompt, maxTokens)
	if err != nil {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return false
	}
	defer s.finish(id, st)
	prefix := "cmpl"
	if chat {
		prefix = "chatcmpl"
	}
	out := response{chat: chat, id: fmt.Sprintf("%s-%s%d", prefix, s.idTag, id),
		created: time.Now().Unix(), model: s.cfg.Model, seed: s.cfg.Seed, promptHash: hashString(all), prompt: prompt}
	if req.Stream {
		s.streamOut(w, r, st, &out, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, arrived)
		return true
	}
	for {
		gen, cached, done := s.read(st)
		if done {
			out.cached = cached
			openai.WriteJSON(w, http.StatusOK, out.full(gen))
			return true
		}
		select {
		case <-r.Context().Done():
			return true
		case <-s.stopped:
			openai.WriteError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "the engine is shutting down")
			return true
		case <-st.notify:
		}
	}
}

func (s *Server) streamOut(w http.ResponseWriter, r *http.Request, st *stream, out *response, usage bool, arrived time.Time) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sent := 0
	for {
		gen, cached, done := s.read(st)
		if gen > sent {
			if sent == 0 && s.cfg.StampTTFT {
				_, _ = fmt.Fprintf(w, "%s%d\n", TTFTStamp, time.Since(arrived).Microseconds())
			}
			if err := writeEvent(w, out.chunk(sent, gen, sent == 0)); err != nil {
				return
			}
			sent = gen
		}
		if done {
			out.cached = cached
			_ = writeEvent(w, out.final())
			if usage {
				_ = writeEvent(w, out.usageChunk(gen))
			}
			// No flush: the end of the body leaves with [DONE] when the
			// handler returns, in one write.
			_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.stopped:
			// Never a silently truncated stream: say why it ends.
			_ = writeEvent(w, map[string]any{"error": map[string]any{"message": "the engine is shutting down",
				"type": "ServiceUnavailableError", "param": nil, "code": 503}})
			_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
			return
		case <-st.notify:
		}
	}
}

func writeEvent(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}
