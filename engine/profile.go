package engine

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// DefaultPrefillChunk is the default per-step token budget: vLLM's long-standing
// max_num_batched_tokens with chunked prefill. Decoding sequences take one token
// of it each; prefill takes the rest.
const DefaultPrefillChunk = 2048

// MinBaseMs is the least step cost a profile may have (one microsecond):
// steps are whole nanoseconds, and a step must take time.
const MinBaseMs = 0.001

// Profile is the cost model of one GPU worker.
type Profile struct {
	Name string `yaml:"name" json:"name"`
	// BaseMs is the fixed cost of one step in milliseconds.
	BaseMs float64 `yaml:"base_ms" json:"base_ms"`
	// PerDecodeSeqMs is the added cost of each decoding sequence in a step.
	PerDecodeSeqMs float64 `yaml:"per_decode_seq_ms" json:"per_decode_seq_ms"`
	// PerPrefillTokenMs is the added cost of each prefill token in a step.
	PerPrefillTokenMs float64 `yaml:"per_prefill_token_ms" json:"per_prefill_token_ms"`
	// KVTokens is the KV-cache budget in tokens, shared by running sequences
	// and the prefix cache.
	KVTokens int `yaml:"kv_tokens" json:"kv_tokens"`
	// MaxSeqs is the number of sequences that may run at once.
	MaxSeqs int `yaml:"max_seqs" json:"max_seqs"`
	// PrefillChunk is the per-step token budget (decode tokens plus prefill
	// tokens). Zero means DefaultPrefillChunk.
	PrefillChunk int `yaml:"prefill_chunk" json:"prefill_chunk"`
	// HostKVTokens is the size, in tokens, of the worker's second KV tier in
	// host memory (see host.go): cache entries evicted from the GPU's KV
	// budget are kept there, least recently used first out, and a later hit
	// is loaded instead of recomputed. Zero (the default) turns the tier off.
	HostKVTokens int `yaml:"host_kv_tokens,omitempty" json:"host_kv_tokens,omitempty"`
	// HostKVLoadTokensPerS is how many KV tokens a second the worker loads
	// from the host tier into GPU memory (host-to-device bandwidth over the
	// model's KV bytes per token). Required when HostKVTokens > 0.
	HostKVLoadTokensPerS float64 `yaml:"host_kv_load_tokens_per_s,omitempty" json:"host_kv_load_tokens_per_s,omitempty"`
}

// HalfProfile is the default, half-scale worker: step cost doubled and KV
// halved, so that a fleet saturates at rates a small machine can serve live.
func HalfProfile() Profile {
	return Profile{Name: "half", BaseMs: 8.0, PerDecodeSeqMs: 0.17, PerPrefillTokenMs: 0.10,
		KVTokens: 500_000, MaxSeqs: 25, PrefillChunk: DefaultPrefillChunk}
}

// FullProfile is the full-scale worker.
func FullProfile() Profile {
	return Profile{Name: "full", BaseMs: 4.0, PerDecodeSeqMs: 0.085, PerPrefillTokenMs: 0.05,
		KVTokens: 1_000_000, MaxSeqs: 25, PrefillChunk: DefaultPrefillChunk}
}

// ProfileByName returns a built-in profile.
func ProfileByName(name string) (Profile, error) {
	switch name {
	case "half", "":
		return HalfProfile(), nil
	case "full":
		return FullProfile(), nil
	case "half-host":
		return HalfHostProfile(), nil
	case "full-host":
		return FullHostProfile(), nil
	}
	return Profile{}, fmt.Errorf("engine: unknown profile %q (built-in profiles: %s; or give one in the fleet file)", name, strings.Join(ProfileNames(), ", "))
}

// ProfileNames are the built-in profiles' names.
func ProfileNames() []string { return []string{"half", "full", "half-host", "full-host"} }

// Validate reports what is wrong with a profile.
func (p Profile) Validate() error {
	var errs []error
	if !(p.BaseMs >= MinBaseMs) || math.IsInf(p.BaseMs, 0) { // also NaN
		errs = append(errs, fmt.Errorf("base_ms must be a finite number >= %v, got %v", MinBaseMs, p.BaseMs))
	}
	if !(p.PerDecodeSeqMs >= 0) || math.IsInf(p.PerDecodeSeqMs, 0) {
		errs = append(errs, fmt.Errorf("per_decode_seq_ms must be a finite number >= 0, got %v", p.PerDecodeSeqMs))
	}
	if !(p.PerPrefillTokenMs >= 0) || math.IsInf(p.PerPrefillTokenMs, 0) {
		errs = append(errs, fmt.Errorf("per_prefill_token_ms must be a finite number >= 0, got %v", p.PerPrefillTokenMs))
	}
	if p.KVTokens <= 0 {
		errs = append(errs, fmt.Errorf("kv_tokens must be > 0, got %d", p.KVTokens))
	}
	if p.MaxSeqs <= 0 {
		errs = append(errs, fmt.Errorf("max_seqs must be > 0, got %d", p.MaxSeqs))
	}
	if p.PrefillChunk < 0 {
		errs = append(errs, fmt.Errorf("prefill_chunk must be >= 0 (0 means %d), got %d", DefaultPrefillChunk, p.PrefillChunk))
	} else if p.PrefillChunk > 0 && p.PrefillChunk <= p.MaxSeqs {
		errs = append(errs, fmt.Errorf("prefill_chunk (%d) must exceed max_seqs (%d) so prefill can progress", p.PrefillChunk, p.MaxSeqs))
	}
	errs = append(errs, p.validateHost()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine profile %q: %w", p.Name, err)
	}
	return nil
}

func (p Profile) chunk() int {
	if p.PrefillChunk == 0 {
		return DefaultPrefillChunk
	}
	return p.PrefillChunk
}

// StepDuration is the cost of one step with the given batch.
func (p Profile) StepDuration(decodingSeqs, prefillTokens int) time.Duration {
	ms := p.BaseMs + p.PerDecodeSeqMs*float64(decodingSeqs) + p.PerPrefillTokenMs*float64(prefillTokens)
	return time.Duration(ms*float64(time.Millisecond) + 0.5)
}
