package wire

import (
	"bytes"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// Internal headers. A router strips every X-Stargate- header from client
// requests before it sets its own.
const (
	// HeaderRouter names the router replica that sent a request to a gateway.
	HeaderRouter = "X-Stargate-Router"
	// HeaderBackend names the backend that served (or refused) a request.
	HeaderBackend = "X-Stargate-Backend"
	// HeaderPrefix starts every internal header.
	HeaderPrefix = "X-Stargate-"
)

// Paths of the internal endpoints.
const (
	PathStats = "/v1/stargate/stats"
)

// Stats is a gateway's stats message (also its heartbeat) to one router:
// it registers the backend on first sight and refreshes it after.
type Stats struct {
	// Backend is the gateway's id; URL is where routers send requests.
	Backend string `json:"backend"`
	URL     string `json:"url"`
	Region  string `json:"region,omitempty"`
	// Seq increases with every stats message of this gateway's boot.
	Seq uint64 `json:"seq"`
	// Models the engine serves and the longest context it takes.
	Models      []string `json:"models"`
	MaxModelLen int      `json:"max_model_len"`
	OwnedBy     string   `json:"owned_by,omitempty"` // the engine's owned_by (vLLM: "vllm")
	Workers     int      `json:"workers"`
	Quarantined int      `json:"quarantined_workers"`
	// CacheTokens is how many prompt tokens the gateway's engines can keep
	// cached, GPU KV and host tier together, as their
	// vllm:cache_config_info says (see scrape.Engine.CacheTokens), summed
	// over the engines; 0 or absent: unknown. A router takes at most
	// telemetry.MaxCacheTokens of it. Like every field, it is covered by the
	// message's signature, which is over the whole body.
	CacheTokens int `json:"cache_tokens,omitempty"`
	// Admission state, from the gateway core.
	Capacity    int     `json:"capacity"`
	Active      int     `json:"active"`
	Waiting     int     `json:"waiting"`
	InputTPS    float64 `json:"input_tps"`
	MaxInputTPS float64 `json:"max_input_tps"`
	// Received counts the requests of the receiving router that reached the
	// gateway, so the router knows which of its dispatches these stats
	// include.
	Received  uint64 `json:"received"`
	Completed uint64 `json:"completed"`
	Rejected  uint64 `json:"rejected"`
	Cancelled uint64 `json:"cancelled"`
	// Engine holds what the gateway scraped from the engine's /metrics.
	Engine EngineMetrics `json:"engine"`
	// Interval is the longest time until the next message; a router counts
	// the backend failed when a few intervals pass without one.
	Interval time.Duration `json:"interval_ns"`
	// Signals are the backend's telemetry (nil before the first scrape);
	// HardwareError says why hardware signals are missing, if they are.
	Signals       *telemetry.Signals `json:"signals,omitempty"`
	HardwareError string             `json:"hardware_error,omitempty"`
}

// ClampCacheTokens is n bounded to 0..telemetry.MaxCacheTokens, the most
// Stats.CacheTokens a router believes.
func ClampCacheTokens(n int) int { return min(max(n, 0), telemetry.MaxCacheTokens) }

// EngineMetrics are vLLM's load metrics as last scraped.
type EngineMetrics struct {
	Running    float64 `json:"running"`
	Waiting    float64 `json:"waiting"`
	KVUsage    float64 `json:"kv_cache_usage"`
	ScrapedAgo float64 `json:"scraped_ago_s"`
	Error      string  `json:"error,omitempty"`
}

// StatsReply is a router's answer to a stats message.
type StatsReply struct {
	Router string `json:"router"`
}

// Counts says how a service's requests ended: every request it accepts ends
// as exactly one of completed, failed (by reason) or rejected (by reason).
// It is not safe for concurrent use; services guard it with their lock.
type Counts struct {
	Accepted  uint64            `json:"accepted"`
	Completed uint64            `json:"completed"`
	Failed    map[string]uint64 `json:"failed"`
	Rejected  map[string]uint64 `json:"rejected"`
}

// End records how an accepted request ended: reason "" is completed; failed
// says whether another reason is a failure or a rejection.
func (c *Counts) End(reason string, failed bool) {
	switch {
	case reason == "":
		c.Completed++
	case failed:
		c.Failed = inc(c.Failed, reason)
	default:
		c.Rejected = inc(c.Rejected, reason)
	}
}

// Ended is how many requests have ended, however they ended.
func (c *Counts) Ended() uint64 {
	n := c.Completed
	for _, v := range c.Failed {
		n += v
	}
	for _, v := range c.Rejected {
		n += v
	}
	return n
}

// Clone returns a copy that shares no map with c.
func (c *Counts) Clone() Counts {
	out := *c
	out.Failed, out.Rejected = make(map[string]uint64, len(c.Failed)), make(map[string]uint64, len(c.Rejected))
	for k, v := range c.Failed {
		out.Failed[k] = v
	}
	for k, v := range c.Rejected {
		out.Rejected[k] = v
	}
	return out
}

func inc(m map[string]uint64, k string) map[string]uint64 {
	if m == nil {
		m = make(map[string]uint64)
	}
	m[k]++
	return m
}

// copyBufs holds the buffers proxies copy answers through, one per request
// in flight: a fresh 32 KiB buffer per request was most of the bytes the
// router and gateway allocated, and the garbage collection they caused
// (BENCHMARKS.md).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// GetCopyBuffer lends a 32 KiB copy buffer; give it back with PutCopyBuffer.
func GetCopyBuffer() *[]byte { return copyBufs.Get().(*[]byte) }

// PutCopyBuffer returns a buffer from GetCopyBuffer.
func PutCopyBuffer(b *[]byte) { copyBufs.Put(b) }

// doneEvent is the SSE event that ends an OpenAI stream.
var doneEvent = []byte("data: [DONE]\n\n")

// EndsStream reports whether a streamed answer's bytes so far end with the
// [DONE] event. A proxy that has just copied such bytes need not flush them:
// nothing follows but the end of the body, which leaves with them when the
// handler returns, in one write instead of two (and a client that stops
// reading at [DONE] finds the end of the body with it, so its connection
// stays open for the next request).
func EndsStream(b []byte) bool {
	return bytes.HasSuffix(b, doneEvent) || bytes.HasSuffix(b, []byte("data: [DONE]\r\n\r\n"))
}

// MaxIDLen bounds a service id (a router's or a gateway's --id).
const MaxIDLen = 64

// ValidID reports whether id can name a service: 1 to MaxIDLen letters,
// digits and ".-_:". Ids travel in headers and key maps, so a service
// keeps only valid ones.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if !idByte(c) {
			return false
		}
	}
	return true
}

// idByte reports whether c may appear in an id.
func idByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '.' || c == '-' || c == '_' || c == ':'
}
