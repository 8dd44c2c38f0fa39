package engine

import (
	"fmt"
	"math"
	"time"
)

// The host tier: a second level of the prefix cache in host memory, as
// vLLM's KV offloading to CPU memory, LMCache, SGLang's hierarchical cache
// (HiCache) and Mooncake's DRAM store keep one.
//
// A cache entry (a prompt block or a finished session's KV) that the GPU's
// LRU list evicts to make room moves to the host tier instead of being
// dropped, as its most recent entry; the host tier drops its own least
// recently used entries beyond Profile.HostKVTokens. An entry lives in one
// tier at a time. A block-cache match goes on into the host tier (block by
// block: each block is looked up on the GPU first, then on the host), and a
// session whose entry is on the host adopts it from there. What a sequence
// takes from the host moves back into GPU memory at its admission, where it
// is held like a GPU hit, and the step that admits it lasts the transfer
// longer: HostLoadDuration of the tokens moved. The load is synchronous (the
// whole batch waits for it), a conservative reading of engines that overlap
// it with compute layer by layer. Moving an entry to the host costs nothing:
// the engines above store evicted KV asynchronously, off the critical path.

// Defaults of the built-in "-host" profiles, from public figures.
const (
	// FullHostKVTokens is the full-host profile's host tier per GPU: 2M
	// tokens, 128 GiB at the full profile's 64 KiB a token, half of a DGX
	// H100's 2 TB of DRAM shared by its 8 GPUs (256 GB each), and twice the
	// GPU's own 1M-token KV budget, the ratio SGLang's HiCache uses by
	// default (hicache_ratio 2).
	FullHostKVTokens = 2_000_000
	// FullHostLoadTokensPerS is the full-host profile's load rate: 25 GB/s
	// (a PCIe Gen5 x16 link carries about 50 GB/s each way in theory; half
	// is what KV transfers of scattered blocks realistically see) over
	// 64 KiB a token (a Llama-3.1-8B-class model, 32 layers x 8 KV heads x
	// 128 dims x K and V, in FP8: what 1M tokens in an 80 GB GPU implies).
	FullHostLoadTokensPerS = 25e9 / 65536
)

// FullHostProfile is the full-scale worker with a host tier.
func FullHostProfile() Profile {
	p := FullProfile()
	p.Name, p.HostKVTokens, p.HostKVLoadTokensPerS = "full-host", FullHostKVTokens, FullHostLoadTokensPerS
	return p
}

// HalfHostProfile is the half-scale worker with a host tier, scaled as the
// half profile is: half the full-host tier and half its load rate.
func HalfHostProfile() Profile {
	p := HalfProfile()
	p.Name, p.HostKVTokens, p.HostKVLoadTokensPerS = "half-host", FullHostKVTokens/2, FullHostLoadTokensPerS/2
	return p
}

// HostTier reports whether the profile has a host tier.
func (p Profile) HostTier() bool { return p.HostKVTokens > 0 }

// CacheCapacity is every token the worker can keep cached: its GPU KV
// budget and its host tier.
func (p Profile) CacheCapacity() int { return p.KVTokens + p.HostKVTokens }

// HostLoadDuration is the time to load tokens from the host tier (0 when
// the tier is off).
func (p Profile) HostLoadDuration(tokens int) time.Duration {
	if tokens <= 0 || !p.HostTier() {
		return 0
	}
	return time.Duration(float64(tokens)/p.HostKVLoadTokensPerS*float64(time.Second) + 0.5)
}

func (p Profile) validateHost() []error {
	var errs []error
	if p.HostKVTokens < 0 {
		errs = append(errs, fmt.Errorf("host_kv_tokens must be >= 0 (0: no host tier), got %d", p.HostKVTokens))
	}
	r := p.HostKVLoadTokensPerS
	switch {
	case !(r >= 0) || math.IsInf(r, 0):
		errs = append(errs, fmt.Errorf("host_kv_load_tokens_per_s must be a finite number >= 0, got %v", r))
	case p.HostKVTokens > 0 && r < 1:
		errs = append(errs, fmt.Errorf("host_kv_load_tokens_per_s must be >= 1 with a host tier (host_kv_tokens %d), got %v; the full-host profile loads %.0f tokens/s (25 GB/s at 64 KiB a token)",
			p.HostKVTokens, r, FullHostLoadTokensPerS))
	case p.HostKVTokens == 0 && r > 0:
		errs = append(errs, fmt.Errorf("host_kv_load_tokens_per_s (%v) needs host_kv_tokens > 0", r))
	}
	return errs
}

// hostTier is a worker's host tier: its entries by key, in an LRU list of
// their own. It is allocated only for a profile with a host tier.
type hostTier struct {
	blocks   map[uint64]*cacheEntry // by block hash id
	sessions map[uint64]*cacheEntry // by session
	lru      cacheEntry             // sentinel: lru.next is most recent
	tokens   int
}

func newHostTier() *hostTier {
	h := &hostTier{blocks: make(map[uint64]*cacheEntry), sessions: make(map[uint64]*cacheEntry)}
	h.lru.next, h.lru.prev = &h.lru, &h.lru
	return h
}

func (h *hostTier) byKind(block bool) map[uint64]*cacheEntry {
	if block {
		return h.blocks
	}
	return h.sessions
}

// HostTokens is the number of tokens in the worker's host tier.
func (w *Worker) HostTokens() int {
	if w.host == nil {
		return 0
	}
	return w.host.tokens
}

// demote takes the least recently used GPU cache entry e out of the GPU
// tier: into the host tier when there is one, else it is dropped.
func (w *Worker) demote(e *cacheEntry) {
	w.dropCache(e)
	h := w.host
	if h == nil || e.tokens > w.prof.HostKVTokens {
		return
	}
	e.onHost = true
	h.byKind(e.block)[e.key] = e
	e.prev, e.next = &h.lru, h.lru.next
	e.next.prev = e
	h.lru.next = e
	h.tokens += e.tokens
	for h.tokens > w.prof.HostKVTokens {
		w.hostDrop(h.lru.prev)
	}
}

// hostDrop removes e from the host tier.
func (w *Worker) hostDrop(e *cacheEntry) {
	h := w.host
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	h.tokens -= e.tokens
	delete(h.byKind(e.block), e.key)
	e.onHost = false
}

// hostForget drops the host copy of a key about to get a GPU entry of its
// own, so that an entry lives in one tier at a time.
func (w *Worker) hostForget(key uint64, block bool) {
	if w.host == nil {
		return
	}
	if e, ok := w.host.byKind(block)[key]; ok {
		w.hostDrop(e)
	}
}

// hostBlock is the host tier's entry for block hash h, nil if none.
func (w *Worker) hostBlock(h uint64) *cacheEntry {
	if w.host == nil {
		return nil
	}
	return w.host.blocks[h]
}

// hostSession is the host tier's entry for a session, nil if none.
func (w *Worker) hostSession(session uint64) *cacheEntry {
	if w.host == nil || session == 0 {
		return nil
	}
	return w.host.sessions[session]
}

// promote moves block e from the host tier into the GPU's block cache as a
// block held by one sequence, and returns the tokens loaded.
func (w *Worker) promote(e *cacheEntry) int {
	w.hostDrop(e)
	w.blocks[e.key] = e
	e.refs = 1
	w.kvUsed += e.tokens
	return e.tokens
}

// hostShare is how many of the prompt tokens a sequence takes from cache
// (cached, from a match of matched tokens) came from the host tier: the
// host blocks of match, less what the always-computed last token leaves
// out.
func hostShare(r *Request, match []*cacheEntry, matched, cached int) int {
	host := 0
	for i, e := range match {
		if e.onHost {
			host += min(e.tokens, r.blockTokens(i))
		}
	}
	return max(host-(matched-cached), 0)
}
