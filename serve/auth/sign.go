package auth

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Header names of a signed request.
const (
	HeaderVersion   = "X-Stargate-Auth"
	HeaderKeyID     = "X-Stargate-Key-Id"
	HeaderSender    = "X-Stargate-Sender"
	HeaderAudience  = "X-Stargate-Audience"
	HeaderBoot      = "X-Stargate-Boot"
	HeaderSeq       = "X-Stargate-Seq"
	HeaderTimestamp = "X-Stargate-Timestamp"
	HeaderSignature = "X-Stargate-Signature"
)

// Version is the signature scheme this package signs and verifies
// (HeaderVersion). Version 2 binds a signature to its audience and to the
// signing key's role; version 1 (no header) named neither and is refused.
const Version = "2"

// MinKeyBytes is the shortest HMAC key accepted.
const MinKeyBytes = 16

// Role is what a key may sign for.
type Role string

// The roles. RoleAny is a key of the older one-key format, which signs and
// verifies for every role.
const (
	RoleRouter   Role = "router"   // a router: its requests to gateways
	RoleGateway  Role = "gateway"  // a gateway: stats to routers, fences to engines
	RoleOperator Role = "operator" // an operator: admin calls
	RoleAny      Role = "*"
)

// Key is a shared HMAC key, its id and its role.
type Key struct {
	ID     string
	Role   Role
	Secret []byte
}

// Audience names the service a signed request is for: "router/ID",
// "gateway/ID", "engine/ID"; or a whole service ("router") where a request
// may reach any replica behind one address (a gateway's stats).
func Audience(service, id string) string { return service + "/" + id }

// ParseKey reads a key of the older one-key format: "ID:SECRET" or just
// "SECRET" (id "default"). Surrounding white space is ignored. Its role is
// RoleAny.
func ParseKey(text string) (Key, error) {
	text = strings.TrimSpace(text)
	id, secret, ok := strings.Cut(text, ":")
	if !ok {
		id, secret = "default", text
	}
	return newKey(id, RoleAny, secret)
}

func newKey(id string, role Role, secret string) (Key, error) {
	if id == "" || len(id) > 64 || strings.ContainsAny(id, " \t\r\n:") {
		return Key{}, fmt.Errorf("auth: key id %q must be 1-64 characters without white space or ':'", id)
	}
	if len(secret) < MinKeyBytes {
		return Key{}, fmt.Errorf("auth: key %q is %d bytes; use at least %d (e.g. openssl rand -hex 32)", id, len(secret), MinKeyBytes)
	}
	return Key{ID: id, Role: role, Secret: []byte(secret)}, nil
}

// Keyring is a service's keys: several may be active per role, for
// rotation. A service signs with the last key of its role and verifies with
// every key.
type Keyring struct {
	keys []Key
}

// NewKeyring holds keys (ids must be distinct).
func NewKeyring(keys ...Key) (*Keyring, error) {
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.ID] {
			return nil, fmt.Errorf("auth: key id %q appears twice", k.ID)
		}
		seen[k.ID] = true
		switch k.Role {
		case RoleRouter, RoleGateway, RoleOperator, RoleAny:
		default:
			return nil, fmt.Errorf("auth: key %q has role %q; roles are router, gateway and operator", k.ID, k.Role)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("auth: the key file holds no key")
	}
	return &Keyring{keys: slices.Clone(keys)}, nil
}

// ReadKeyring reads a key file: one key per line as "ROLE KEY-ID SECRET"
// (role router, gateway or operator; fields separated by white space);
// blank lines and lines starting with # are skipped. A file of one line
// "ID:SECRET" or "SECRET" is the older one-key format: one key for every
// role (RoleAny).
func ReadKeyring(r io.Reader) (*Keyring, error) {
	var keys []Key
	var legacy []string
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Fields(text)
		if len(f) == 1 {
			legacy = append(legacy, text)
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("auth: key file line %d: want ROLE KEY-ID SECRET", line)
		}
		k, err := newKey(f[1], Role(f[0]), f[2])
		if err != nil {
			return nil, fmt.Errorf("%w (key file line %d)", err, line)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: reading key file: %w", err)
	}
	if len(legacy) > 0 {
		if len(legacy) > 1 || len(keys) > 0 {
			return nil, errors.New("auth: key file mixes formats: use one \"ROLE KEY-ID SECRET\" line per key")
		}
		k, err := ParseKey(legacy[0])
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return NewKeyring(keys...)
}

// LoadKeyring reads a key file (see ReadKeyring).
func LoadKeyring(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: reading key file: %w", err)
	}
	k, err := ReadKeyring(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// LoadKey reads a key file of the older one-key format (see ParseKey).
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

// Keys returns the keys, in file order.
func (k *Keyring) Keys() []Key { return slices.Clone(k.keys) }

// Signing returns the key a service of role signs with: the last key of
// that role (or of RoleAny); false if there is none.
func (k *Keyring) Signing(role Role) (Key, bool) {
	for i := len(k.keys) - 1; i >= 0; i-- {
		if k.keys[i].Role == role || k.keys[i].Role == RoleAny {
			return k.keys[i], true
		}
	}
	return Key{}, false
}

// Legacy reports whether the ring is the older one-key format.
func (k *Keyring) Legacy() bool { return len(k.keys) == 1 && k.keys[0].Role == RoleAny }

// RandomKey returns a fresh key for every role, for a fleet started in one
// process.
func RandomKey(id string) Key {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return Key{ID: id, Role: RoleAny, Secret: []byte(hex.EncodeToString(b[:]))}
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
	if key.Role == "" {
		key.Role = RoleAny // a key made in code without a role
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Signer{key: key, sender: sender, boot: hex.EncodeToString(b[:]), now: time.Now}
}

// Key is the key the signer signs with.
func (s *Signer) Key() Key { return s.key }

// Sign sets the signature headers of req for body (which must be req's
// body), for audience (see Audience).
func (s *Signer) Sign(req *http.Request, body []byte, audience string) {
	seq := strconv.FormatUint(s.seq.Add(1), 10)
	ts := strconv.FormatInt(s.now().UnixMilli(), 10)
	h := req.Header
	h.Set(HeaderVersion, Version)
	h.Set(HeaderKeyID, s.key.ID)
	h.Set(HeaderSender, s.sender)
	h.Set(HeaderAudience, audience)
	h.Set(HeaderBoot, s.boot)
	h.Set(HeaderSeq, seq)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, hex.EncodeToString(mac(s.key.Secret, req.Method, req.URL.Path, s.key.ID, string(s.key.Role), s.sender, audience, s.boot, seq, ts, body)))
}

// NewRequest builds a request with a JSON body, signed for audience.
func (s *Signer) NewRequest(audience, method, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	s.Sign(req, body, audience)
	return req, nil
}

// mac is the signature of version 2: HMAC-SHA256 over the version, the
// request's method and path (its action), the key id and role, the sender,
// the audience, boot, sequence and timestamp, each ended by a newline, and
// the SHA-256 of the body.
func mac(secret []byte, method, path, keyID, role, sender, audience, boot, seq, ts string, body []byte) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, secret)
	for _, part := range []string{"stargate-auth-" + Version, method, path, keyID, role, sender, audience, boot, seq, ts} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	m.Write(sum[:])
	return m.Sum(nil)
}

// Rejection reasons, the labels of a Verifier's counts.
const (
	ReasonMissing   = "missing_headers"
	ReasonVersion   = "wrong_version"
	ReasonUnknownID = "unknown_key_id"
	ReasonRole      = "wrong_role"
	ReasonAudience  = "wrong_audience"
	ReasonSignature = "bad_signature"
	ReasonSkew      = "timestamp_skew"
	ReasonReplay    = "replayed_sequence"
	ReasonStale     = "signed_before_start"
	ReasonBody      = "unreadable_body"
	ReasonTooMany   = "too_many_boots"
)

// ErrRejected is wrapped by every verification failure.
var ErrRejected = errors.New("auth: message rejected")

// Message is a verified message's identity: who sent it, with which key
// and role, for which audience.
type Message struct {
	Sender   string
	Boot     string
	Seq      uint64
	KeyID    string
	Role     Role
	Audience string
}

// Audit logs the audit line of an admin call r: its action, the caller's
// address and who signed it (msg), or, refused (err), the key id it named
// and why. Every service's admin API logs through it.
func Audit(log *slog.Logger, r *http.Request, msg Message, err error) {
	action := r.Method + " " + r.URL.Path
	if err != nil {
		log.Warn("admin call refused", "action", action, "remote", r.RemoteAddr, "key_id", r.Header.Get(HeaderKeyID), "err", err)
		return
	}
	log.Info("admin call", "action", action, "remote", r.RemoteAddr,
		"sender", msg.Sender, "key_id", msg.KeyID, "role", string(msg.Role), "audience", msg.Audience)
}

// Verifier checks signed messages addressed to one service.
type Verifier struct {
	self, service string
	keys          map[string]Key
	maxSkew       time.Duration
	now           func() time.Time
	// start is when the verifier began: a control-plane message signed
	// more than StartSkew before it is refused (see check).
	start time.Time

	mu       sync.Mutex
	last     map[string]*replay // sender + "\n" + boot
	rejected map[string]uint64
	accepted uint64
}

// replay is what a Verifier remembers of one sender's boot: the highest
// sequence accepted and, for the data plane (Check), which of the
// replayWindow up to it were seen.
type replay struct {
	top  uint64
	seen *seenBits // bit seq%replayWindow: seq was accepted (data plane only)
	// newest is the latest timestamp (Unix ms) of a message accepted:
	// once it is more than maxSkew old, every message of this boot is
	// refused by its timestamp, and the pair may be forgotten.
	newest int64
}

// replayWindow is how far out of order a data-plane request may arrive: as
// many sequence numbers as a router may have in flight to one gateway at
// once (each signed in order, sent concurrently, so they arrive in any
// order; 64 refused valid requests at 200 concurrent streams). 512 bytes
// per sender and boot, for at most maxTracked of them.
const replayWindow = 4096

// DefaultMaxSkew is how far a message's timestamp may be from the verifier's clock.
const DefaultMaxSkew = 5 * time.Second

// StartSkew is how long before a verifier's start a control-plane message
// (Verify, VerifyService) may have been signed. The sequence numbers a
// verifier has seen live in memory, so a restarted service would otherwise
// take, once more, a message captured before its restart while its
// timestamp is within the window. Far below DefaultMaxSkew: it only has to
// forgive the signer's clock being that much behind the service's; a
// signer further behind has its calls refused (ReasonStale) for that long
// after the service starts, and retries.
const StartSkew = 500 * time.Millisecond

// maxTracked bounds the (sender, boot) pairs a Verifier remembers. When
// it is reached, pairs whose messages are all out of the timestamp window
// are forgotten; if none is, a new pair is refused (ReasonTooMany) until
// one is: forgetting a pair whose messages are still in the window would
// let them be taken again (a holder of any key could sign that many boots
// and then replay another role's captured call).
const maxTracked = 1 << 16

// NewVerifier accepts messages for audience self ("router/router-1"; see
// Audience) signed with any of keys.
func NewVerifier(self string, maxSkew time.Duration, keys ...Key) *Verifier {
	service, _, _ := strings.Cut(self, "/")
	v := &Verifier{self: self, service: service, keys: make(map[string]Key), maxSkew: maxSkew, now: time.Now,
		start: time.Now(), last: make(map[string]*replay), rejected: make(map[string]uint64)}
	for _, k := range keys {
		if k.Role == "" {
			k.Role = RoleAny // a key made in code without a role
		}
		v.keys[k.ID] = k
	}
	return v
}

// Self is the audience the verifier accepts.
func (v *Verifier) Self() string { return v.self }

// Verify reads req's body (at most limit bytes) and checks its signature:
// a key of one of roles, audience this service, and a sequence above the
// last one accepted from that sender and boot. It returns the body and the
// message identity, or an error wrapping ErrRejected that says why.
func (v *Verifier) Verify(req *http.Request, limit int64, roles ...Role) ([]byte, Message, error) {
	return v.verify(req, limit, false, roles)
}

// VerifyService is Verify that also accepts the whole service as audience
// (a message that may reach any replica behind one address: a gateway's
// stats to a router Service).
func (v *Verifier) VerifyService(req *http.Request, limit int64, roles ...Role) ([]byte, Message, error) {
	return v.verify(req, limit, true, roles)
}

func (v *Verifier) verify(req *http.Request, limit int64, service bool, roles []Role) ([]byte, Message, error) {
	// The headers first: a request that cannot be valid is refused before
	// its body (up to limit bytes) is read and held.
	if _, _, err := v.headers(req, service, roles); err != nil {
		return nil, Message{}, err
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil || int64(len(body)) > limit {
		return nil, Message{}, v.reject(ReasonBody, fmt.Sprintf("body unreadable or over %d bytes", limit))
	}
	msg, err := v.check(req, body, service, false, roles)
	if err != nil {
		return nil, Message{}, err
	}
	return body, msg, nil
}

// Check verifies a data-plane request whose body the caller has read: as
// Verify, but requests of one sender may arrive out of order (up to
// replayWindow sequence numbers apart, each accepted once), as concurrent requests do.
func (v *Verifier) Check(req *http.Request, body []byte, roles ...Role) (Message, error) {
	return v.check(req, body, false, true, roles)
}

// Signed reports whether req carries a signature at all.
func Signed(req *http.Request) bool { return req.Header.Get(HeaderSignature) != "" }

// Plausible reports whether req's signature headers could be valid for a
// call taking one of roles (everything but the signature itself and the
// sequence, which need the body): a caller waits for the body of such a
// request only (see RouterSignatures.NeedsBody). It counts no rejection.
func (v *Verifier) Plausible(req *http.Request, roles ...Role) bool {
	_, _, err := v.precheck(req, false, roles)
	return err == nil
}

// headers is precheck counting its rejection.
func (v *Verifier) headers(req *http.Request, service bool, roles []Role) (Key, int64, error) {
	key, ms, err := v.precheck(req, service, roles)
	if err != nil {
		var r *rejection
		if errors.As(err, &r) {
			return Key{}, 0, v.reject(r.reason, r.detail)
		}
		return Key{}, 0, err
	}
	return key, ms, nil
}

// rejection is a reason and its detail, not yet counted.
type rejection struct{ reason, detail string }

func (r *rejection) Error() string { return r.reason + ": " + r.detail }

// precheck checks what of a signed request needs no body: version, the
// headers' presence and size, the key, its role, the audience, and the
// timestamp's window. It returns the key and the timestamp (Unix ms).
func (v *Verifier) precheck(req *http.Request, service bool, roles []Role) (Key, int64, error) {
	h := req.Header
	version, keyID, sender, audience, boot, seqText, ts, sig := h.Get(HeaderVersion), h.Get(HeaderKeyID), h.Get(HeaderSender),
		h.Get(HeaderAudience), h.Get(HeaderBoot), h.Get(HeaderSeq), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if version != Version {
		return Key{}, 0, &rejection{ReasonVersion, fmt.Sprintf("signature version %.8q; this service takes version %s (upgrade the sender)", version, Version)}
	}
	if keyID == "" || sender == "" || audience == "" || boot == "" || seqText == "" || ts == "" || sig == "" {
		return Key{}, 0, &rejection{ReasonMissing, "a signature header is missing"}
	}
	if len(sender) > 128 || len(boot) > 32 {
		return Key{}, 0, &rejection{ReasonMissing, "sender or boot header too long"}
	}
	key, ok := v.keys[keyID]
	if !ok {
		return Key{}, 0, &rejection{ReasonUnknownID, fmt.Sprintf("key id %.64q is not configured here", keyID)}
	}
	if key.Role != RoleAny && !slices.Contains(roles, key.Role) {
		return Key{}, 0, &rejection{ReasonRole, fmt.Sprintf("key %q is a %s key; this call takes %v", keyID, key.Role, roles)}
	}
	if audience != v.self && (!service || audience != v.service) {
		return Key{}, 0, &rejection{ReasonAudience, fmt.Sprintf("signed for %.80q, this is %q", audience, v.self)}
	}
	seq, err1 := strconv.ParseUint(seqText, 10, 64)
	ms, err2 := strconv.ParseInt(ts, 10, 64)
	if err1 != nil || err2 != nil || seq == 0 {
		return Key{}, 0, &rejection{ReasonMissing, "sequence or timestamp is not a number"}
	}
	if skew := v.now().Sub(time.UnixMilli(ms)); skew > v.maxSkew || skew < -v.maxSkew {
		return Key{}, 0, &rejection{ReasonSkew, fmt.Sprintf("timestamp is %v away from this clock (limit %v); check the clocks", skew.Round(time.Millisecond), v.maxSkew)}
	}
	return key, ms, nil
}

func (v *Verifier) check(req *http.Request, body []byte, service, window bool, roles []Role) (Message, error) {
	key, ms, err := v.headers(req, service, roles)
	if err != nil {
		return Message{}, err
	}
	h := req.Header
	keyID, sender, audience, boot, seqText, ts, sig := h.Get(HeaderKeyID), h.Get(HeaderSender),
		h.Get(HeaderAudience), h.Get(HeaderBoot), h.Get(HeaderSeq), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(key.Secret, req.Method, req.URL.Path, keyID, string(key.Role), sender, audience, boot, seqText, ts, body)) {
		return Message{}, v.reject(ReasonSignature, "signature does not match (wrong key?)")
	}
	seq, _ := strconv.ParseUint(seqText, 10, 64) // a number: precheck
	// A control-plane message from before this verifier began may have
	// been seen by the process before it: refuse it rather than forget.
	// Data-plane requests (window) are not checked: see docs/security.md.
	if signed := time.UnixMilli(ms); !window && signed.Before(v.start.Add(-StartSkew)) {
		return Message{}, v.reject(ReasonStale, fmt.Sprintf("signed %v before this service started (it restarted, or the signer's clock is behind); sign it again",
			v.start.Sub(signed).Round(time.Millisecond)))
	}
	id := sender + "\n" + boot
	v.mu.Lock()
	defer v.mu.Unlock()
	r := v.last[id]
	if r == nil {
		if len(v.last) >= maxTracked && !v.forgetExpired() {
			v.rejected[ReasonTooMany]++
			return Message{}, fmt.Errorf("%w: %s: %d senders' boots signed within the last %v; retry later", ErrRejected, ReasonTooMany, len(v.last), v.maxSkew)
		}
		r = &replay{}
		v.last[id] = r
	}
	if !r.accept(seq, window) {
		v.rejected[ReasonReplay]++
		return Message{}, fmt.Errorf("%w: %s: sequence %d was seen or is too old (highest %d)", ErrRejected, ReasonReplay, seq, r.top)
	}
	r.newest = max(r.newest, ms)
	v.accepted++
	return Message{Sender: sender, Boot: boot, Seq: seq, KeyID: keyID, Role: key.Role, Audience: audience}, nil
}

// forgetExpired drops the pairs none of whose messages the timestamp
// window still takes, and says whether there is room for another. v.mu is
// held.
func (v *Verifier) forgetExpired() bool {
	oldest := v.now().Add(-v.maxSkew).UnixMilli()
	for id, r := range v.last {
		if r.newest < oldest {
			delete(v.last, id)
		}
	}
	return len(v.last) < maxTracked
}

// accept records seq if it is new: above the highest, or (window) one of
// the replayWindow up to it not yet seen. Sequence 0 is never valid.
func (r *replay) accept(seq uint64, window bool) bool {
	if seq == 0 {
		return false
	}
	if seq > r.top {
		if window {
			if r.seen == nil {
				r.seen = new(seenBits)
			}
			if seq-r.top >= replayWindow {
				clear(r.seen[:])
			} else {
				for s := r.top + 1; s < seq; s++ {
					r.seen.set(s, false)
				}
			}
			r.seen.set(seq, true)
		}
		r.top = seq
		return true
	}
	if !window || r.seen == nil || r.top-seq >= replayWindow || r.seen.has(seq) {
		return false
	}
	r.seen.set(seq, true)
	return true
}

// seenBits marks the sequences of one replayWindow, by seq % replayWindow.
type seenBits [replayWindow / 64]uint64

func (b *seenBits) has(seq uint64) bool {
	i := seq % replayWindow
	return b[i/64]&(1<<(i%64)) != 0
}

func (b *seenBits) set(seq uint64, on bool) {
	i := seq % replayWindow
	if on {
		b[i/64] |= 1 << (i % 64)
	} else {
		b[i/64] &^= 1 << (i % 64)
	}
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

// RingOf is ring if set, else key alone as a ring (the older one-key
// format, every role), else nil.
func RingOf(key Key, ring *Keyring) *Keyring {
	if ring != nil {
		return ring
	}
	if len(key.Secret) == 0 {
		return nil
	}
	if key.Role == "" {
		key.Role = RoleAny
	}
	return &Keyring{keys: []Key{key}}
}
