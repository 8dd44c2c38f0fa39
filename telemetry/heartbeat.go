package telemetry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Heartbeat is what a gateway pushes to every router each interval.
type Heartbeat struct {
	Backend string `json:"backend"`
	// Boot identifies the sender's process start (e.g. its start time in
	// Unix nanoseconds); a restart must use a larger one.
	Boot uint64 `json:"boot"`
	// Seq increases with every heartbeat of one boot.
	Seq uint64 `json:"seq"`
	// SentUnixNano is the sender's wall clock when it sent the heartbeat.
	SentUnixNano int64   `json:"sent_unix_nano"`
	Signals      Signals `json:"signals"`
}

// Sealed is a heartbeat signed with HMAC-SHA256 under a key id. The MAC
// covers the key id and the body.
type Sealed struct {
	KeyID string          `json:"kid"`
	Body  json.RawMessage `json:"body"`
	MAC   []byte          `json:"mac"`
}

// Errors of Verifier.Open; each rejection wraps one.
var (
	ErrUnknownKey   = errors.New("telemetry: unknown heartbeat key id")
	ErrBadSignature = errors.New("telemetry: bad heartbeat signature")
	ErrSkew         = errors.New("telemetry: heartbeat timestamp outside the allowed skew")
	ErrReplay       = errors.New("telemetry: heartbeat sequence did not increase")
	ErrMalformed    = errors.New("telemetry: malformed heartbeat")
)

// MaxHeartbeatBytes bounds a sealed heartbeat's body.
const MaxHeartbeatBytes = 64 << 10

func mac(key []byte, keyID string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(keyID))
	m.Write([]byte{0})
	m.Write(body)
	return m.Sum(nil)
}

// Seal signs hb with key under keyID.
func Seal(keyID string, key []byte, hb *Heartbeat) (Sealed, error) {
	if len(key) == 0 || keyID == "" {
		return Sealed{}, errors.New("telemetry: sealing a heartbeat needs a key id and a non-empty key")
	}
	body, err := json.Marshal(hb)
	if err != nil {
		return Sealed{}, fmt.Errorf("telemetry: encoding heartbeat: %w", err)
	}
	return Sealed{KeyID: keyID, Body: body, MAC: mac(key, keyID, body)}, nil
}

// Verifier checks sealed heartbeats: a known key id, a valid MAC, a send
// time within MaxSkew of the receiver's clock, and a sequence number above
// the last one accepted from the same backend and boot (a larger boot starts
// a new sequence; a smaller one is rejected). It counts what it rejects. Not
// safe for concurrent use.
type Verifier struct {
	Keys    map[string][]byte
	MaxSkew time.Duration

	last     map[string]bootSeq
	Rejected map[error]uint64
}

type bootSeq struct{ boot, seq uint64 }

// DefaultMaxSkew is the default tolerance between sender and receiver clocks.
const DefaultMaxSkew = 5 * time.Second

// Open verifies s at the receiver's wall-clock time nowUnixNano and returns
// the heartbeat.
func (v *Verifier) Open(nowUnixNano int64, s Sealed) (Heartbeat, error) {
	hb, err := v.open(nowUnixNano, s)
	if err != nil {
		if v.Rejected == nil {
			v.Rejected = map[error]uint64{}
		}
		for _, e := range []error{ErrUnknownKey, ErrBadSignature, ErrSkew, ErrReplay, ErrMalformed} {
			if errors.Is(err, e) {
				v.Rejected[e]++
			}
		}
	}
	return hb, err
}

func (v *Verifier) open(now int64, s Sealed) (Heartbeat, error) {
	key, ok := v.Keys[s.KeyID]
	if !ok {
		return Heartbeat{}, fmt.Errorf("%w %q", ErrUnknownKey, s.KeyID)
	}
	if len(s.Body) > MaxHeartbeatBytes {
		return Heartbeat{}, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrMalformed, len(s.Body), MaxHeartbeatBytes)
	}
	if !hmac.Equal(mac(key, s.KeyID, s.Body), s.MAC) {
		return Heartbeat{}, ErrBadSignature
	}
	var hb Heartbeat
	if err := json.Unmarshal(s.Body, &hb); err != nil {
		return Heartbeat{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if hb.Backend == "" {
		return Heartbeat{}, fmt.Errorf("%w: no backend name", ErrMalformed)
	}
	skew := v.MaxSkew
	if skew <= 0 {
		skew = DefaultMaxSkew
	}
	if d := time.Duration(now - hb.SentUnixNano); d > skew || d < -skew {
		return Heartbeat{}, fmt.Errorf("%w: %v apart (limit %v)", ErrSkew, d, skew)
	}
	prev, seen := v.last[hb.Backend]
	if seen && (hb.Boot < prev.boot || (hb.Boot == prev.boot && hb.Seq <= prev.seq)) {
		return Heartbeat{}, fmt.Errorf("%w: backend %q boot %d seq %d after boot %d seq %d", ErrReplay, hb.Backend, hb.Boot, hb.Seq, prev.boot, prev.seq)
	}
	if v.last == nil {
		v.last = map[string]bootSeq{}
	}
	v.last[hb.Backend] = bootSeq{hb.Boot, hb.Seq}
	return hb, nil
}
