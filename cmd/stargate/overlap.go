package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/study"
)

func newOverlapCmd() *cobra.Command {
	var (
		quick    bool
		live     bool
		warmup   time.Duration
		measure  time.Duration
		out      string
		parallel int
		seeds    int
		clients  []int
		slots    []int
		workload string
	)
	cmd := &cobra.Command{
		Use:   "overlap",
		Short: "The bounded-worker overlap study: max_inflight_per_worker 1, 2 and 25 under closed-loop load",
		Long: `Simulate closed-loop clients (each sends its next turn when the previous one
ends) against one backend of 4 half-scale GPUs, with max_inflight_per_worker
(the gateway's slots per worker) of 1, 2 and the default 25, at 4, 8, 16, 32,
64, 128 and 256 clients, seeds 1-3, 30 s warm-up and 60 s measured. The gateway's
waiting bound is 400 requests for every setting.

Records requests/s, input tokens/s, client latency p50/p95, TTFT p95, gateway
queue time, engine step time, mean batch, failures, rejections and degraded
completions (completed turns that missed the TTFT SLO or were preempted in
the engine), and says where each setting wins.

With --live, each run starts that fleet in this process (a mock engine, its
gateway and a router on loopback) and drives it with closed-loop clients over
HTTP; every live run is matched by a simulator run of the same settings and
seed, and the findings compare them. Live defaults: one seed, 4, 16, 64 and
128 clients, 15 s warm-up and 30 s measured: 12 runs, about 10 minutes.

With --workload worker, the study runs instead the bounded worker overlap
note's worker: a small deterministic model of its two stages (L1/L2 serial
in the worker, L3 in its separate worker) and its batching GPU stage (batch
16, one model instance, 5 ms collection delay), parameters from the note's
"where the time goes" table (see docs/bounded-overlap.md), at 288 and 432
clients (--clients), 1 and 2 slots (--slots), seeds 1-3 (--seeds), 5 s of
virtual warm-up and 30 s measured (--warmup, --measure); it prints the
note's columns and writes worker.json to --out.

Prints a table and writes results.json, report.html and table.txt to --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seeds < 0 {
				return usagef("--replicates %d: want at least 1 (or 0 for the default)", seeds)
			}
			start := time.Now()
			switch workload {
			case "llm":
			case "worker":
				return runWorkerStudy(cmd, clients, slots, seeds, warmup, measure, out)
			default:
				return usagef("--workload %q: want llm or worker", workload)
			}
			opts := study.OverlapOptions{Quick: quick, Seeds: seeds, Clients: clients, Slots: slots, Parallel: parallel,
				Progress: newProgress(cmd.ErrOrStderr(), "overlap study")}
			if cmd.Flags().Changed("warmup") || cmd.Flags().Changed("measure") {
				opts.Warmup, opts.Measure = warmup, measure
			}
			var res *study.OverlapResults
			var err error
			if live {
				if quick {
					return usagef("--quick is for the simulator; the live study's defaults are already short (see --help)")
				}
				res, err = study.LiveOverlap(cmd.Context(), policy.NewRegistry(), opts)
			} else {
				res, err = study.Overlap(cmd.Context(), policy.NewRegistry(), opts)
			}
			if errors.Is(err, study.ErrBadOverlapOptions) {
				return usageError{err}
			}
			if err != nil {
				return failure{err}
			}
			return reportStudy(cmd.OutOrStdout(), res.Table(), res.Findings(), res.WriteFiles, out, len(res.Runs), start)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&quick, "quick", false, "one seed, 20 s warm-up + 40 s measured")
	fl.BoolVar(&live, "live", false, "run against a live in-process fleet, each run matched by a simulator run")
	fl.DurationVar(&warmup, "warmup", 0, "warm-up of every run (default 30 s, 20 s with --quick, 15 s with --live)")
	fl.DurationVar(&measure, "measure", 0, "measured window of every run (default 60 s, 40 s with --quick, 30 s with --live)")
	fl.StringVar(&out, "out", "out/overlap", "directory for the report files")
	fl.IntVar(&parallel, "parallel", 0, "runs at once (default: one per CPU)")
	fl.IntVar(&seeds, "replicates", 0, "seeds per cell (default 3, 1 with --quick)")
	fl.IntSliceVar(&clients, "clients", nil, "client counts (default 4,8,16,32,64,128,256; live 4,16,64,128)")
	fl.IntSliceVar(&slots, "slots", nil, "max_inflight_per_worker settings (default 1,2,25; worker: 1,2)")
	fl.StringVar(&workload, "workload", "llm", "llm (the LLM engine) or worker (the bounded worker overlap note's two-stage worker and batching GPU)")
	return cmd
}
