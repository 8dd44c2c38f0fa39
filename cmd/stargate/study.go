package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/report"
	"github.com/stargate-llm/stargate/study"
)

func newStudyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "study",
		Short: "Run a named experiment and write its report",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("name a study: routing, resilience, slo-matrix or overlap (see stargate study --help)")
		},
	}
	cmd.AddCommand(newRoutingCmd(), newResilienceCmd(), newSLOMatrixCmd(), newOverlapCmd())
	return cmd
}

func newRoutingCmd() *cobra.Command {
	var (
		quick    bool
		out      string
		parallel int
		live     bool
		shard    string
		sweep    bool
	)
	lo := study.DefaultLiveOptions()
	cmd := &cobra.Command{
		Use:   "routing",
		Short: "The reference routing study: affinity policies against baselines on two fleets",
		Long: `Simulate the routing study of docs/DESIGN.md: the heterogeneous and homogeneous
220-GPU fleets in five regions, waw, pulsar-waw (and pulsar-waw-tps, its
measured-TPS weighting) and four baselines, at 350 and 450 req/s (hetero) and
450 and 550 req/s (homo), seeds 1-3, 240 s warm-up and 240 s measured.

With --sweep it also runs the sweep of goodput against nominal rate with the
full-scale engine: both fleets, pulsar-waw, waw and pulsar-waw-tps, 250 to
1,100 req/s in steps of 170, seeds 1 and 2 (72 more runs), in its own section
of the table, results.json ("sweep") and report.html, with where each policy
collapses.

Prints a table and writes results.json, report.html and table.txt to --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if live && sweep {
				return usagef("--sweep runs in the simulator only; drop --live or --sweep")
			}
			if sweep && cmd.Flags().Changed("shard") {
				return usagef("--sweep does not run sharded yet; drop --shard or --sweep")
			}
			if cmd.Flags().Changed("shard") {
				return runRoutingShard(cmd, shard, out, live, study.RoutingOptions{Quick: quick, Parallel: parallel}, lo)
			}
			if live {
				return runLiveRouting(cmd, lo, out)
			}
			opts, err := simRoutingOptions(cmd, study.RoutingOptions{Quick: quick, Parallel: parallel}, lo)
			if err != nil {
				return err
			}
			start := time.Now()
			opts.Progress = newProgress(cmd.ErrOrStderr(), "routing study")
			if sweep {
				so := study.DefaultSweep()
				if quick {
					so = study.QuickSweep()
				}
				opts.Sweep = &so
			}
			res, err := study.Routing(cmd.Context(), policy.NewRegistry(), opts)
			if err != nil {
				return failure{err}
			}
			if err := res.WriteExtraText(cmd.OutOrStdout()); err != nil {
				return failure{err}
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return reportStudy(cmd.OutOrStdout(), res.Table(), res.Findings(), res.WriteFiles, out, len(res.Runs)+len(res.Sweep), start)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "one seed, one rate per fleet, 150 s warm-up + 60 s measured")
	f.StringVar(&out, "out", "out/routing", "directory for the report files")
	f.IntVar(&parallel, "parallel", 0, "runs at once (default: one per CPU)")
	f.BoolVar(&sweep, "sweep", false, "also run the rate sweep with the full-scale engine (72 more runs; with --quick, 150 s + 60 s each)")
	f.BoolVar(&live, "live", false, "run the study on live in-process fleets at --scale, each run matched by a simulator run")
	f.Float64Var(&lo.Scale, "scale", lo.Scale, "live: fraction of every backend's GPUs (at least 1) and of the rate")
	f.DurationVar(&lo.Warmup, "warmup", lo.Warmup, "warm-up before the measured window (simulated: default the study's)")
	f.DurationVar(&lo.Measure, "measure", lo.Measure, "length of the measured window (simulated: default the study's)")
	f.StringVar(&shard, "shard", "", "run only part I of N of the study (I/N, I from 0) and write --out/part-I-of-N.json; join the parts with stargate report merge")
	f.StringSliceVar(&lo.Fleets, "fleet", lo.Fleets, "live: fleets (built-in names or files)")
	f.StringSliceVar(&lo.Policies, "policy", lo.Policies, "policies (simulated: default all of the study's; live: this default)")
	f.Uint64Var(&lo.Seed, "seed", lo.Seed, "live: seed")
	return cmd
}

func runLiveRouting(cmd *cobra.Command, lo study.LiveOptions, out string) error {
	errw := cmd.ErrOrStderr()
	lo.Log = func(msg string) { fmt.Fprintf(errw, "%s %s\n", time.Now().Format("15:04:05"), msg) }
	reg := policy.NewRegistry()
	for _, p := range lo.Policies {
		if !reg.Has(p) {
			return usagef("unknown policy %q (known: %s)", p, strings.Join(reg.Names(), ", "))
		}
	}
	pairs, err := study.LiveRouting(cmd.Context(), reg, lo)
	if errors.Is(err, study.ErrInvalidRun) {
		return usageError{err}
	}
	if err != nil {
		return failure{err}
	}
	t := study.LiveTable(pairs)
	w := cmd.OutOrStdout()
	if err := t.WriteText(w); err != nil {
		return failure{err}
	}
	if agree, err := study.RankAgreement(pairs); err == nil {
		for fl, ok := range agree {
			fmt.Fprintf(w, "%s: live and sim rank the policies the same way: %v\n", fl, ok)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return failure{err}
	}
	if err := study.WriteFile(out, "live.json", func(w io.Writer) error { return writeIndented(w, pairs) }); err != nil {
		return failure{err}
	}
	if err := study.WriteFile(out, "live.txt", t.WriteText); err != nil {
		return failure{err}
	}
	if err := study.WriteLiveRecords(out, pairs); err != nil {
		return failure{err}
	}
	fmt.Fprintf(w, "wrote %s/live.json, %s/live.txt and the turns of each side in %s/records\n", out, out, out)
	return nil
}

// reportStudy prints a study's table and findings, writes its files to out
// and says what it wrote.
func reportStudy(w io.Writer, t report.Table, findings []string, write func(dir string) error, out string, runs int, start time.Time) error {
	if err := t.WriteText(w); err != nil {
		return failure{err}
	}
	fmt.Fprintln(w)
	for _, f := range findings {
		fmt.Fprintln(w, f)
	}
	if err := write(out); err != nil {
		return failure{err}
	}
	fmt.Fprintf(w, "\n%d runs in %.1f s; wrote %s/results.json, %s/report.html and %s/table.txt\n",
		runs, time.Since(start).Seconds(), out, out, out)
	return nil
}
