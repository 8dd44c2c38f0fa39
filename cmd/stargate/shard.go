package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/study"
)

// simRoutingOptions applies --policy, --warmup and --measure to the
// simulated routing study when they are given (their defaults are the live
// study's).
func simRoutingOptions(cmd *cobra.Command, opts study.RoutingOptions, lo study.LiveOptions) (study.RoutingOptions, error) {
	f := cmd.Flags()
	if f.Changed("policy") {
		reg := policy.NewRegistry()
		for _, p := range lo.Policies {
			if !reg.Has(p) {
				return opts, usagef("unknown policy %q (known: %s)", p, strings.Join(reg.Names(), ", "))
			}
		}
		opts.Policies = lo.Policies
	}
	if f.Changed("warmup") {
		if lo.Warmup <= 0 {
			return opts, usagef("--warmup must be > 0, got %v", lo.Warmup)
		}
		opts.Warmup = lo.Warmup
	}
	if f.Changed("measure") {
		if lo.Measure <= 0 {
			return opts, usagef("--measure must be > 0, got %v", lo.Measure)
		}
		opts.Measure = lo.Measure
	}
	return opts, nil
}

// runRoutingShard runs one part of the simulated routing study and writes
// it to out. Every argument is checked before any run starts.
func runRoutingShard(cmd *cobra.Command, spec, out string, live bool, opts study.RoutingOptions, lo study.LiveOptions) error {
	shard, err := study.ParseShard(spec)
	if err != nil {
		return usageError{err}
	}
	if live {
		return usagef("--shard runs part of the simulated study; it cannot be combined with --live")
	}
	opts, err = simRoutingOptions(cmd, opts, lo)
	if err != nil {
		return err
	}
	start := time.Now()
	opts.Progress = newProgress(cmd.ErrOrStderr(), "routing study, part "+shard.String())
	part, err := study.RoutingShard(cmd.Context(), policy.NewRegistry(), opts, shard)
	if err != nil {
		return failure{err}
	}
	if err := part.Write(out); err != nil {
		return failure{err}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "part %s: %d of the study's %d runs in %.1f s; wrote %s/%s\n",
		shard, len(part.Runs), len(part.Plan), time.Since(start).Seconds(), out, study.PartFile(shard))
	return nil
}

func newReportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Work on study reports",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("name a report command: merge (see stargate report --help)")
		},
	}
	cmd.AddCommand(newMergeCmd())
	return cmd
}

func newMergeCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Join the parts of a sharded study into one report",
		Long: `Read the part-I-of-N.json files that stargate study NAME --shard I/N wrote into
the given directories and write the study's results.json, report.html and
table.txt to --out: the same files an unsharded run writes, but for the runs'
wall times. Every part 0..N-1 must be there once, from the same study options.`,
		Example: `  for i in 0 1 2 3; do stargate study routing --shard $i/4 --out parts/$i; done
  stargate report merge parts/0 parts/1 parts/2 parts/3 --out out/routing`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			start := time.Now()
			parts, err := study.ReadParts(dirs)
			if err != nil {
				return usageError{err}
			}
			res, err := study.MergeRouting(parts)
			if errors.Is(err, study.ErrMerge) {
				return usageError{err}
			}
			if err != nil {
				return failure{err}
			}
			// What an unsharded run prints before its table, then the same.
			if err := res.WriteExtraText(cmd.OutOrStdout()); err != nil {
				return failure{err}
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return reportStudy(cmd.OutOrStdout(), res.Table(), res.Findings(), res.WriteFiles, out, len(res.Runs), start)
		},
	}
	cmd.Flags().StringVar(&out, "out", "out/merged", "directory for the report files")
	return cmd
}
