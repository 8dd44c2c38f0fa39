// Package study runs named experiments: it expands a study into simulation
// runs, executes them in parallel on all cores, collects their results and
// writes the study's table, JSON and HTML report. It is the one package above
// the cores that measures wall time.
//
// The routing study (Routing) is the project's reference experiment, from
// docs/DESIGN.md: both study fleets, waw, pulsar-waw (and its measured-TPS variant)
// and the four baselines, at 350 and 450 req/s on the heterogeneous fleet and
// 450 and 550 req/s on the homogeneous one, seeds 1-3, 240 s of warm-up and
// 240 s measured.
package study
