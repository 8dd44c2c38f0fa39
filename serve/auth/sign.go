package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Header names of a signed request.
const (
	HeaderKeyID     = "X-Stargate-Key-Id"
	HeaderSender    = "X-Stargate-Sender"
	HeaderBoot      = "X-Stargate-Boot"
	HeaderSeq       = "X-Stargate-Seq"
	HeaderTimestamp = "X-Stargate-Timestamp"
	HeaderSignature = "X-Stargate-Signature"
)

// MinKeyBytes is the shortest HMAC key accepted.
const MinKeyBytes = 16

// Key is a shared HMAC key and its id.
type Key struct {
	ID     string
	Secret []byte
}

// ParseKey reads a key from text "ID:SECRET" or just "SECRET" (id "default").
// Surrounding white space is ignored.
func ParseKey(text string) (Key, error) {
	text = strings.TrimSpace(text)
	id, secret, ok := strings.Cut(text, ":")
	if !ok {
		id, secret = "default", text
	}
	if id == "" || strings.ContainsAny(id, " \t\r\n") {
		return Key{}, fmt.Errorf("auth: key id %q must be non-empty and hold no white space", id)
	}
	if len(secret) < MinKeyBytes {
		return Key{}, fmt.Errorf("auth: key %q is %d bytes; use at least %d (e.g. openssl rand -hex 32)", id, len(secret), MinKeyBytes)
	}
	return Key{ID: id, Secret: []byte(secret)}, nil
}

// LoadKey reads a key file (see ParseKey).
func LoadKey(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("auth: reading key file: %w", err)
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// RandomKey returns a fresh key, for a fleet started in one process.
func RandomKey(id string) Key {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return Key{ID: id, Secret: []byte(hex.EncodeToString(b[:]))}
}

// Signer signs one sender's messages.
type Signer struct {
	key    Key
	sender string
	boot   string
	seq    atomic.Uint64
	now    func() time.Time
}

// NewSigner returns a signer for sender with a fresh boot id.
func NewSigner(key Key, sender string) *Signer {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Signer{key: key, sender: sender, boot: hex.EncodeToString(b[:]), now: time.Now}
}

// Sign sets the signature headers of req for body (which must be req's body).
func (s *Signer) Sign(req *http.Request, body []byte) {
	seq := strconv.FormatUint(s.seq.Add(1), 10)
	ts := strconv.FormatInt(s.now().UnixMilli(), 10)
	h := req.Header
	h.Set(HeaderKeyID, s.key.ID)
	h.Set(HeaderSender, s.sender)
	h.Set(HeaderBoot, s.boot)
	h.Set(HeaderSeq, seq)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, hex.EncodeToString(mac(s.key.Secret, req.Method, req.URL.Path, s.key.ID, s.sender, s.boot, seq, ts, body)))
}

// NewRequest builds a signed request with a JSON body.
func (s *Signer) NewRequest(method, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	s.Sign(req, body)
	return req, nil
}

func mac(secret []byte, method, path, keyID, sender, boot, seq, ts string, body []byte) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, secret)
	for _, part := range []string{method, path, keyID, sender, boot, seq, ts} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	m.Write(sum[:])
	return m.Sum(nil)
}

// Rejection reasons, the labels of a Verifier's counts.
const (
	ReasonMissing   = "missing_headers"
	ReasonUnknownID = "unknown_key_id"
	ReasonSignature = "bad_signature"
	ReasonSkew      = "timestamp_skew"
	ReasonReplay    = "replayed_sequence"
	ReasonBody      = "unreadable_body"
)

// ErrRejected is wrapped by every verification failure.
var ErrRejected = errors.New("auth: message rejected")

// Message is a verified message's identity.
type Message struct {
	Sender string
	Boot   string
	Seq    uint64
}

// Verifier checks signed messages.
type Verifier struct {
	keys    map[string][]byte
	maxSkew time.Duration
	now     func() time.Time

	mu       sync.Mutex
	last     map[string]uint64 // sender + "\n" + boot -> last accepted seq
	rejected map[string]uint64
	accepted uint64
}

// DefaultMaxSkew is how far a message's timestamp may be from the verifier's clock.
const DefaultMaxSkew = 5 * time.Second

// maxTracked bounds the (sender, boot) pairs a Verifier remembers.
const maxTracked = 1 << 16

// NewVerifier accepts messages signed with any of keys.
func NewVerifier(maxSkew time.Duration, keys ...Key) *Verifier {
	v := &Verifier{keys: make(map[string][]byte), maxSkew: maxSkew, now: time.Now,
		last: make(map[string]uint64), rejected: make(map[string]uint64)}
	for _, k := range keys {
		v.keys[k.ID] = k.Secret
	}
	return v
}

// Verify reads req's body (at most limit bytes) and checks its signature.
// It returns the body and the message identity, or an error wrapping
// ErrRejected that says why.
func (v *Verifier) Verify(req *http.Request, limit int64) ([]byte, Message, error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil || int64(len(body)) > limit {
		return nil, Message{}, v.reject(ReasonBody, fmt.Sprintf("body unreadable or over %d bytes", limit))
	}
	h := req.Header
	keyID, sender, boot, seqText, ts, sig := h.Get(HeaderKeyID), h.Get(HeaderSender), h.Get(HeaderBoot),
		h.Get(HeaderSeq), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if keyID == "" || sender == "" || boot == "" || seqText == "" || ts == "" || sig == "" {
		return nil, Message{}, v.reject(ReasonMissing, "a signature header is missing")
	}
	secret, ok := v.keys[keyID]
	if !ok {
		return nil, Message{}, v.reject(ReasonUnknownID, fmt.Sprintf("key id %q is not configured here", keyID))
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(secret, req.Method, req.URL.Path, keyID, sender, boot, seqText, ts, body)) {
		return nil, Message{}, v.reject(ReasonSignature, "signature does not match (wrong key?)")
	}
	seq, err1 := strconv.ParseUint(seqText, 10, 64)
	ms, err2 := strconv.ParseInt(ts, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, Message{}, v.reject(ReasonMissing, "sequence or timestamp is not a number")
	}
	if skew := v.now().Sub(time.UnixMilli(ms)); skew > v.maxSkew || skew < -v.maxSkew {
		return nil, Message{}, v.reject(ReasonSkew, fmt.Sprintf("timestamp is %v away from this clock (limit %v); check the clocks", skew.Round(time.Millisecond), v.maxSkew))
	}
	id := sender + "\n" + boot
	v.mu.Lock()
	defer v.mu.Unlock()
	if seq <= v.last[id] {
		v.rejected[ReasonReplay]++
		return nil, Message{}, fmt.Errorf("%w: %s: sequence %d is not above %d", ErrRejected, ReasonReplay, seq, v.last[id])
	}
	if _, seen := v.last[id]; !seen && len(v.last) >= maxTracked {
		clear(v.last) // a flood of boots; the timestamp window still bounds replays
	}
	v.last[id] = seq
	v.accepted++
	return body, Message{Sender: sender, Boot: boot, Seq: seq}, nil
}

func (v *Verifier) reject(reason, detail string) error {
	v.mu.Lock()
	v.rejected[reason]++
	v.mu.Unlock()
	return fmt.Errorf("%w: %s: %s", ErrRejected, reason, detail)
}

// Counts returns the accepted count and the rejected counts by reason.
func (v *Verifier) Counts() (accepted uint64, rejected map[string]uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rejected = make(map[string]uint64, len(v.rejected))
	for k, n := range v.rejected {
		rejected[k] = n
	}
	return v.accepted, rejected
}
