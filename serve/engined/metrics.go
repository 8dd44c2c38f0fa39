package engined

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics under vLLM's names, so tools
// built for vLLM (and Stargate's gateway) read the mock engine unchanged.
type metrics struct {
	reg            *prometheus.Registry
	prefixQueries  prometheus.Counter
	prefixHits     prometheus.Counter
	ttft           prometheus.Histogram
	e2e            prometheus.Histogram
	promptTokens   prometheus.Counter
	generationToks prometheus.Counter
}

// latencyBuckets follow vLLM's TTFT and end-to-end buckets, in seconds.
var latencyBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}

func newMetrics(s *Server) *metrics {
	labels := prometheus.Labels{"model_name": s.cfg.Model}
	m := &metrics{reg: prometheus.NewRegistry()}
	gauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f))
	}
	gauge("vllm:num_requests_running", "Requests in model execution batches.", func() float64 {
		r, _, _ := s.load()
		return float64(r)
	})
	gauge("vllm:num_requests_waiting", "Requests waiting to be processed.", func() float64 {
		_, w, _ := s.load()
		return float64(w)
	})
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage of running requests; 1 means 100 percent.", func() float64 {
		_, _, kv := s.load()
		return kv
	})
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		m.reg.MustRegister(c)
		return c
	}
	m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.")
	m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prompt tokens served from the prefix cache.")
	m.promptTokens = counter("vllm:prompt_tokens_total", "Prompt tokens processed.")
	m.generationToks = counter("vllm:generation_tokens_total", "Tokens generated.")
	hist := func(name, help string) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: latencyBuckets})
		m.reg.MustRegister(h)
		return h
	}
	m.ttft = hist("vllm:time_to_first_token_seconds", "Time to first token.")
	m.e2e = hist("vllm:e2e_request_latency_seconds", "End-to-end request latency.")
	p := s.cfg.Profile
	cacheInfo := prometheus.Labels{"block_size": "16", "num_gpu_blocks": strconv.Itoa(p.KVTokens / 16 * s.cfg.GPUs),
		"enable_prefix_caching": "True", "cache_dtype": "auto"}
	if p.HostTier() { // the host KV tier, in 16-token blocks as vLLM counts its CPU blocks
		cacheInfo["num_cpu_blocks"] = strconv.Itoa(p.HostKVTokens / 16 * s.cfg.GPUs)
	}
	if !s.vllm() { // real vLLM exports neither the worker count nor max_num_seqs
		workers := prometheus.NewGauge(prometheus.GaugeOpts{Name: "stargate_engine_workers",
			Help: "GPU workers of this engine; a gateway sizes its slots by it.", ConstLabels: labels})
		workers.Set(float64(s.cfg.GPUs))
		m.reg.MustRegister(workers)
		cacheInfo["max_num_seqs"] = strconv.Itoa(p.MaxSeqs)
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the KV cache configuration.",
		ConstLabels: cacheInfo})
	info.Set(1)
	m.reg.MustRegister(info)
	// The server's start, as prometheus_client's process collector gives it
	// for a real vLLM: a gateway tells a restarted engine by it.
	started := prometheus.NewGauge(prometheus.GaugeOpts{Name: "process_start_time_seconds",
		Help: "Start time of the process since unix epoch in seconds."})
	started.Set(float64(s.start.UnixNano()) / 1e9)
	m.reg.MustRegister(started)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// load reads running and waiting sequences and the KV fill of running ones.
func (s *Server) load() (running, waiting int, kvFill float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	used, total := 0, 0
	for w := range s.cl.Len() {
		worker := s.cl.Worker(w)
		running += worker.Running()
		waiting += worker.Waiting()
		used += worker.KVUsedAt(now)
		total += worker.Profile().KVTokens
	}
	return running, waiting, float64(used) / float64(total)
}
