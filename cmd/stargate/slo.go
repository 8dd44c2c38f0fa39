package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/study"
	"github.com/stargate-llm/stargate/workload"
)

func newSLOMatrixCmd() *cobra.Command {
	var (
		fleetName, policies, classes, tiers, out string
		replicates, steps, parallel              int
		quick, live, calibrate                   bool
		windows                                  = study.DefaultWindows()
	)
	cmd := &cobra.Command{
		Use:   "slo-matrix",
		Short: "Sustainable rate within an SLO, by bisection, for workload classes x policies x SLO tiers",
		Long: `Find, for every workload class, SLO tier and policy, the highest constant
request rate at which P95 TTFT stays within the SLO and at least 95% of
requests succeed, by bisection, as the Solyx AI Grid paper's SLO matrix does.
Each step sends the class's traffic for 30 s of warm-up, 45 s measured and
15 s of cool-down (--warmup, --measure, --cooldown); the requests sent in the
measured window are its sample.
Cells are the median over replicates (seeds 1..N) with a bootstrap interval;
a cell counts only with at least 500 samples.

Classes: ` + strings.Join(workload.ClassNames(), ", ") + `.
The default fleet, three-site, has nine GPUs in three sites (examples/three-site.yaml).

With --live, every step starts the fleet in this process (engines, gateways
and routers on loopback, with the fleet's WAN latencies injected), drives the
class's traffic over HTTP and stops it; steps run one at a time and each
takes its windows plus a second or two, so a live search of 10 steps takes
about 15 minutes with the default windows. The mock engine keys its prefix
cache by session, so rapid_shift's fresh prompts still hit it live (the
simulator serves them cold).

Prints the matrix and writes results.json (every step's raw figures),
report.html (a chart per class), table.txt and table.md to --out.`,
		Example: `  stargate study slo-matrix --quick
  stargate study slo-matrix --policy round-robin,least-request --classes very_long --tiers 2
  stargate study slo-matrix --fleet examples/three-site.yaml --replicates 5 --out out/slo
  stargate study slo-matrix --live --classes baseline_mixed --policy round-robin,pulsar-waw --tiers 2 --steps 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := policy.NewRegistry()
			fleet, err := config.Load(fleetName)
			if err != nil {
				return usageError{err}
			}
			opts := study.SLOMatrixOptions{Fleet: fleet, Registry: reg, Policies: splitList(policies), Classes: splitList(classes),
				Replicates: replicates, Steps: steps, Quick: quick, Parallel: parallel, Calibrate: calibrate,
				Progress: newProgress(cmd.ErrOrStderr(), "slo matrix"), Windows: windows}
			if live {
				if cmd.Flags().Changed("parallel") && parallel != 1 {
					return usagef("--parallel %d: live steps run one at a time (each starts a whole fleet); drop --parallel", parallel)
				}
				errw := cmd.ErrOrStderr()
				opts.Runner = &study.LiveRunner{Fleet: fleet, Registry: reg, Log: func(msg string) { fmt.Fprintln(errw, "live step:", msg) }}
				opts.Mode, opts.Parallel, opts.Progress = "live", 1, nil
			}
			if windows.Warmup < 0 || windows.Measure <= 0 || windows.Cooldown < 0 {
				return usagef("--warmup and --cooldown must be >= 0 and --measure > 0, got %v, %v and %v", windows.Warmup, windows.Cooldown, windows.Measure)
			}
			if cmd.Flags().Changed("replicates") && replicates < 1 {
				return usagef("--replicates %d: want at least 1", replicates)
			}
			if opts.Tiers, err = study.ParseTiers(tiers); err != nil {
				return usagef("--tiers: %v", err)
			}
			start := time.Now()
			m, err := study.RunSLOMatrix(cmd.Context(), opts)
			if errors.Is(err, study.ErrInvalidRun) {
				return usageError{err}
			}
			if err != nil {
				return failure{err}
			}
			w := cmd.OutOrStdout()
			t := m.Table()
			if err := t.WriteText(w); err != nil {
				return failure{err}
			}
			fmt.Fprintln(w)
			for _, f := range m.Findings() {
				fmt.Fprintln(w, f)
			}
			if err := m.WriteFiles(out); err != nil {
				return failure{err}
			}
			fmt.Fprintf(w, "\n%d searches in %.1f s; wrote %s/results.json, %s/report.html, %s/table.txt and %s/table.md\n",
				len(m.Searches), time.Since(start).Seconds(), out, out, out, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&fleetName, "fleet", "three-site", "fleet: a built-in name ("+strings.Join(config.PresetNames(), ", ")+") or a fleet file")
	f.StringVar(&policies, "policy", "", "policies, comma separated (default: "+strings.Join(study.SLOPolicies, ", ")+", those registered)")
	f.StringVar(&classes, "classes", "", "workload classes, comma separated (default: all eight)")
	f.StringVar(&tiers, "tiers", "1,2,3", "SLO tiers to measure (1 tightest, 2 the Solyx AI Grid paper's, 3 loosest), comma separated")
	f.IntVar(&replicates, "replicates", 0, "replicates (seeds 1..N) per cell (default 3; 1 with --quick)")
	f.IntVar(&steps, "steps", 8, "bisection steps after the two ends of the range")
	f.BoolVar(&calibrate, "calibrate", true, "first run every policy on "+study.CalibrationClass+" at 10 req/s for 60 s, no warm-up (the Solyx AI Grid paper's calibration)")
	f.BoolVar(&quick, "quick", false, "one replicate of two classes ("+strings.Join(study.QuickClasses, ", ")+")")
	f.StringVar(&out, "out", "out/slo-matrix", "directory for the report files")
	f.IntVar(&parallel, "parallel", 0, "searches at once (default: one per CPU; live: 1)")
	f.BoolVar(&live, "live", false, "run every step on a live in-process fleet over HTTP")
	f.DurationVar(&windows.Warmup, "warmup", windows.Warmup, "each step's warm-up")
	f.DurationVar(&windows.Measure, "measure", windows.Measure, "each step's measured window (its sample is the requests sent in it)")
	f.DurationVar(&windows.Cooldown, "cooldown", windows.Cooldown, "each step's cool-down, excluded from the sample")
	return cmd
}
