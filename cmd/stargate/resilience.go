package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/study"
)

func newResilienceCmd() *cobra.Command {
	var (
		quick      bool
		live       bool
		out        string
		parallel   int
		replicates int
		seedList   string
		post       time.Duration
		fleetFile  string
		rps        float64
		phases     []string
		policies   []string
	)
	cmd := &cobra.Command{
		Use:   "resilience",
		Short: "The resilience study: failure phases against pressure and the baselines",
		Long: `Simulate the resilience study: on a three-site fleet of nine backends, the
phases baseline, capability, failover, failover-ttl500 (failover with the
Solyx AI Grid paper's 500 ms heartbeat TTL; simulator only), wan-jitter,
telemetry-loss, telemetry-loss-each (each backend's exporter dies on its
own; simulator only), burst and thermal, each injecting its fault at the same
onset, for pressure, pulsar-waw,
least-request and round-robin (and, in wan-jitter, pressure-no-net: pressure
without the network signals), seeds 1-5 or --seeds (180 s before the onset, 60 s
measured after it). Reports success rate, TTFT p50/p95/p99, misroutes, time to
detect (in burst, the routing reaction p95) and to recover with 95%
confidence intervals, the failover phase's reroute times, checks pressure
against the best baseline and the resilience targets, and sets the figures
beside the Solyx AI Grid paper's. Per phase it also prints the paired
differences of TTFT p95 and p99 between the phase's first policy and each
other one on the same seeds.

With --live, every run also runs on a live fleet in this process, one at a
time: scale 0.25 of the fleet (one GPU per backend, 9 GPUs) at 11.25 req/s,
the faults injected on the running services at the onset, for pressure,
least-request and round-robin (and pressure-no-net in wan-jitter); each live
run is set beside its simulator twin of the same scale and seed. Live
windows: 120 s before the onset and 60 s after it (90 s and 30 s with
--quick: 120 s of wall time a run, all 44 live runs in about 90 minutes).

Prints a table and writes results.json, report.html and table.txt to --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if replicates == 1 || replicates < 0 {
				return usagef("--replicates must be at least 2 (confidence intervals need them), got %d", replicates)
			}
			if post < 0 || (post > 0 && post < 10*time.Second) {
				return usagef("--post must be at least 10s (two 5 s bins), got %v", post)
			}
			var seeds []uint64
			if seedList != "" {
				var err error
				if seeds, err = study.ParseSeeds(seedList); err != nil {
					return usagef("--seeds: %v", err)
				}
			}
			reg := study.ResilienceRegistry()
			for _, p := range policies {
				if !reg.Has(p) {
					return usagef("unknown policy %q (known: %v)", p, reg.Names())
				}
			}
			start := time.Now()
			opts := study.ResilienceOptions{Quick: quick, Replicates: replicates, Seeds: seeds, Post: post,
				Phases: phases, Policies: policies, Progress: newProgress(cmd.ErrOrStderr(), "resilience study"),
				Runner: study.SimPhaseRunner{Registry: reg, Parallel: parallel}, RPS: rps}
			if fleetFile != "" {
				fl, err := config.Load(fleetFile)
				if err != nil {
					return usagef("--fleet: %v", err)
				}
				opts.Fleet = fl
			}
			if live {
				errw := cmd.ErrOrStderr()
				opts.Live = study.LivePhaseRunner{Registry: reg,
					Log: func(msg string) { fmt.Fprintf(errw, "%s %s\n", time.Now().Format("15:04:05"), msg) }}
			}
			res, err := study.Resilience(cmd.Context(), opts)
			if errors.Is(err, study.ErrBadOptions) {
				return usageError{err}
			}
			if err != nil {
				return failure{err}
			}
			var lines []string
			for _, c := range res.Criteria() {
				phase := c.Phase
				if c.Mode != "" {
					phase = c.Mode + " " + phase
				}
				lines = append(lines, fmt.Sprintf("%-5s %s: %s (%s)", c.Result, phase, c.What, c.Detail))
			}
			lines = append(append(lines, ""), res.PaperComparison()...)
			lines = append(append(lines, res.SeedLines()...), res.NetworkLines()...)
			lines = append(lines, res.PairedLines()...)
			if cp, err := study.MeasureControlPlane(study.StudyBackends(opts.Fleet), 1000); err == nil {
				lines = append(lines, "", study.ControlPlaneLine(cp))
			}
			if err := reportStudy(cmd.OutOrStdout(), res.Table(), lines, res.WriteFiles, out, len(res.Runs), start); err != nil {
				return err
			}
			if err := res.CheckGaps(); err != nil {
				return failure{err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "2 replicates, 120 s before the onset (90 s live), 30 s measured")
	f.BoolVar(&live, "live", false, "also run every phase on a live in-process fleet at scale 0.25, beside its simulator twin")
	f.StringVar(&out, "out", "out/resilience", "directory for the report files")
	f.IntVar(&parallel, "parallel", 0, "runs at once (default: one per CPU)")
	f.IntVar(&replicates, "replicates", 0, "seeds per phase and policy (default 5, 2 with --quick)")
	f.StringVar(&seedList, "seeds", "", "run these seeds instead of 1..replicates: numbers and ranges, such as 1-10,31-40 (the pressure defaults were tuned on seeds 11-30)")
	f.StringVar(&fleetFile, "fleet", "", "run on this fleet (a built-in name or a fleet file) instead of the study's nine backends; simulator only, and the phases must name backends it has")
	f.Float64Var(&rps, "rps", 0, "with --fleet: the rate (default: the study's rate per GPU, 1.25 req/s, times the fleet's GPUs)")
	f.DurationVar(&post, "post", 0, "span measured after the onset (default 60 s, 30 s with --quick)")
	f.StringSliceVar(&phases, "phase", nil, "run only these phases (repeat or comma-separate; network: the five network sub-phases)")
	f.StringSliceVar(&policies, "policy", nil, "run only these policies (default: pressure, pulsar-waw, least-request, round-robin; live: pressure, least-request, round-robin; both add pressure-no-net in wan-jitter)")
	return cmd
}
