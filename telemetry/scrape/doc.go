// Package scrape reads the Prometheus text that a gateway scrapes: an
// inference engine's metrics (vLLM's names, and SGLang's where present) and
// an NVIDIA DCGM exporter's, parsed with prometheus/common/expfmt into the
// raw values package telemetry turns into signals.
//
// The parsers are pure functions of their input (they read an io.Reader and
// nothing else) and never panic on malformed text; fuzz tests hold them to
// it. Input beyond MaxBytes is refused.
package scrape
