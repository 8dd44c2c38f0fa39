package auth

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// APIKeys holds client API keys as SHA-256 hashes.
type APIKeys struct {
	hashes [][sha256.Size]byte
}

// ReadAPIKeys reads one key per line: either "sha256:HEX" (the hash of the
// key) or the key itself, which is hashed at once. Blank lines and lines
// starting with # are skipped.
func ReadAPIKeys(r io.Reader) (*APIKeys, error) {
	k := &APIKeys{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var h [sha256.Size]byte
		if hexText, ok := strings.CutPrefix(text, "sha256:"); ok {
			b, err := hex.DecodeString(hexText)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("auth: api keys line %d: sha256: must be followed by 64 hex digits", line)
			}
			copy(h[:], b)
		} else {
			if len(text) < MinKeyBytes {
				return nil, fmt.Errorf("auth: api keys line %d: a key must be at least %d characters", line, MinKeyBytes)
			}
			h = sha256.Sum256([]byte(text))
		}
		k.hashes = append(k.hashes, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: reading api keys: %w", err)
	}
	if len(k.hashes) == 0 {
		return nil, fmt.Errorf("auth: the api keys file holds no key")
	}
	return k, nil
}

// LoadAPIKeys reads an API keys file (see ReadAPIKeys).
func LoadAPIKeys(path string) (*APIKeys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	defer f.Close()
	k, err := ReadAPIKeys(f)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// Allowed reports whether req carries "Authorization: Bearer KEY" with a known
// key. Every stored hash is compared, in constant time.
func (k *APIKeys) Allowed(req *http.Request) bool {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return false
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for i := range k.hashes {
		match |= subtle.ConstantTimeCompare(h[:], k.hashes[i][:])
	}
	return match == 1
}
