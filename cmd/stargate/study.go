package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/study"
)

func newStudyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "study",
		Short: "Run a named experiment and write its report",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("name a study: routing or slo-matrix (see stargate study --help)")
		},
	}
	cmd.AddCommand(newRoutingCmd(), newSLOMatrixCmd())
	return cmd
}

func newRoutingCmd() *cobra.Command {
	var (
		quick    bool
		out      string
		parallel int
	)
	cmd := &cobra.Command{
		Use:   "routing",
		Short: "The reference routing study: affinity policies against baselines on two fleets",
		Long: `Simulate the routing study of docs/DESIGN.md: the heterogeneous and homogeneous
220-GPU fleets in five regions, waw, pulsar-waw (and pulsar-waw-tps, its
measured-TPS weighting) and four baselines, at 350 and 450 req/s (hetero) and
450 and 550 req/s (homo), seeds 1-3, 240 s warm-up and 240 s measured.

Prints a table and writes results.json, report.html and table.txt to --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			res, err := study.Routing(cmd.Context(), policy.NewRegistry(),
				study.RoutingOptions{Quick: quick, Parallel: parallel, Progress: newProgress(cmd.ErrOrStderr(), "routing study")})
			if err != nil {
				return failure{err}
			}
			w := cmd.OutOrStdout()
			t := res.Table()
			if err := t.WriteText(w); err != nil {
				return failure{err}
			}
			fmt.Fprintln(w)
			for _, f := range res.Findings() {
				fmt.Fprintln(w, f)
			}
			if err := res.WriteFiles(out); err != nil {
				return failure{err}
			}
			fmt.Fprintf(w, "\n%d runs in %.1f s; wrote %s/results.json, %s/report.html and %s/table.txt\n",
				len(res.Runs), time.Since(start).Seconds(), out, out, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "one seed, one rate per fleet, 150 s warm-up + 60 s measured")
	f.StringVar(&out, "out", "out/routing", "directory for the report files")
	f.IntVar(&parallel, "parallel", 0, "runs at once (default: one per CPU)")
	return cmd
}
