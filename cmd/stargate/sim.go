package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/study"
	"github.com/stargate-llm/stargate/workload"
)

func newSimCmd() *cobra.Command {
	var (
		fleets, policies, rates, seeds string
		engineName, format, out        string
		trace, traceFormat, classes    string
		traceRate                      float64
		warmup, measure, cooldown      time.Duration
		heartbeatTTL                   time.Duration
		heartbeatInterval              time.Duration
		parallel                       int
		reuseCeiling                   bool
	)
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate fleets x policies x rates x seeds and print their metrics",
		Long: `Simulate every combination of the given fleets, policies, rates and seeds,
in parallel on all cores, and print one row (or JSON object) per run.

Fleets are built-in (` + strings.Join(config.PresetNames(), ", ") + `) or fleet files (see
examples/). With --class, a workload class's open loop (requests at a
constant rate) replaces the fleet's sessions; classes: ` + strings.Join(workload.ClassNames(), ", ") + `.

With --trace FILE the fleet replays a recorded trace instead of its sessions:
every request at its recorded time (scaled to --trace-rate if given), one
turn each, with its block hash ids in the engines' block cache (Mooncake), so
reuse % is the trace's real prefix reuse on that fleet. Requests that arrive
after the warm-up and before its end are measured, each to its end; --measure
defaults to the rest of the trace. --rps is then unused.`,
		Example: `  stargate sim --fleet hetero --policy waw,pulsar-waw --rps 450
  stargate sim --fleet examples/homo.yaml --rps 450,550 --seed 1,2,3 --format json
  stargate sim --fleet three-site --class baseline_mixed,very_long --policy round-robin,least-request --rps 5 --warmup 30s --measure 45s --cooldown 15s
  stargate sim --fleet examples/plan/trace-fleet.yaml --trace traces/mooncake/conversation_trace.jsonl --policy least-request,pulsar-waw --warmup 300s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := policy.NewRegistry()
			var specs []study.RunSpec
			rpsList, err := parseFloats("--rps", rates)
			if err != nil {
				return err
			}
			seedList, err := parseSeeds(seeds)
			if err != nil {
				return err
			}
			if format != "table" && format != "json" && format != "csv" {
				return usagef("--format %q: want table, json or csv", format)
			}
			var reqs []workload.TraceRequest
			if trace != "" {
				if reqs, err = readTrace(trace, traceFormat); err != nil {
					return err
				}
				if traceRate < 0 {
					return usagef("--trace-rate must be >= 0")
				}
				if traceRate > 0 {
					if reqs, err = workload.Retime(reqs, traceRate); err != nil {
						return usageError{err}
					}
				}
				last := reqs[len(reqs)-1].Arrival
				if warmup >= last {
					return usagef("--warmup %v leaves none of the trace (its last request arrives at %v)", warmup, last.Round(time.Millisecond))
				}
				if !cmd.Flags().Changed("measure") {
					measure = last - warmup + time.Millisecond
				}
				rpsList = []float64{workload.Rate(reqs)}
				if reuseCeiling {
					return printReuseCeiling(cmd.OutOrStdout(), reqs, warmup, splitList(fleets), engineName)
				}
			} else if reuseCeiling {
				return usagef("--reuse-ceiling needs --trace")
			} else if traceRate != 0 || traceFormat != "auto" {
				return usagef("--trace-rate and --trace-format need --trace")
			}
			if trace != "" && classes != "" {
				return usagef("--trace and --class each replace the fleet's sessions; give one of them")
			}
			classList := splitList(classes)
			if len(classList) == 0 {
				classList = []string{""} // the fleet's sessions
			}
			for _, c := range classList {
				if _, err := workload.ClassByName(c); c != "" && err != nil {
					return usageError{err}
				}
			}
			for _, fl := range splitList(fleets) {
				fleet, err := config.Load(fl)
				if err != nil {
					return usageError{err}
				}
				if err := applyLiveness(cmd.Flags(), fleet, heartbeatTTL, heartbeatInterval); err != nil {
					return err
				}
				for _, class := range classList {
					for _, pol := range splitList(policies) {
						if !reg.Has(pol) {
							return usagef("unknown policy %q (known: %s)", pol, strings.Join(reg.Names(), ", "))
						}
						for _, rps := range rpsList {
							for _, seed := range seedList {
								specs = append(specs, study.RunSpec{FleetName: fleet.Name, Fleet: fleet, Policy: pol, RPS: rps,
									Seed: seed, Engine: engineName, Warmup: warmup, Measure: measure, Cooldown: cooldown,
									Class: class, KeepRecords: out != "", Requests: reqs, BlockSize: workload.MooncakeBlockSize})
							}
						}
					}
				}
			}
			if len(specs) == 0 {
				return usagef("nothing to run: give at least one fleet and policy")
			}
			runs, err := study.RunAll(cmd.Context(), specs, reg, parallel, newProgress(cmd.ErrOrStderr(), "simulating"))
			if errors.Is(err, study.ErrInvalidRun) {
				return usageError{err}
			}
			if err != nil {
				return failure{err}
			}
			res := &study.Results{Study: "sim", Runs: runs}
			if out != "" {
				if err := writeSimFiles(out, specs, res); err != nil {
					return failure{fmt.Errorf("writing %s: %w", out, err)}
				}
			}
			w := cmd.OutOrStdout()
			switch format {
			case "json":
				err = res.WriteJSON(w)
			case "csv":
				err = study.RunsTable(runs).WriteCSV(w)
			default:
				err = study.RunsTable(runs).WriteText(w)
			}
			if err != nil {
				return failure{err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&fleets, "fleet", "hetero", "fleets: built-in names ("+strings.Join(config.PresetNames(), ", ")+") or fleet files, comma separated")
	f.StringVar(&classes, "class", "", "workload classes whose open loop replaces the fleet's sessions, comma separated (rps is then the class's request rate)")
	f.StringVar(&policies, "policy", "pulsar-waw", "placement policies, comma separated ("+strings.Join(policy.NewRegistry().Names(), ", ")+")")
	f.StringVar(&rates, "rps", "450", "nominal request rates in req/s, comma separated")
	f.StringVar(&seeds, "seed", "1", "random seeds, comma separated")
	f.StringVar(&engineName, "engine", "", "engine profile replacing the fleet's default: half, full, half-host, full-host or a profile of the fleet file (backends with their own profile keep it)")
	f.DurationVar(&warmup, "warmup", 240*time.Second, "warm-up before the measured window")
	f.DurationVar(&measure, "measure", 240*time.Second, "length of the measured window")
	livenessFlags(f, &heartbeatTTL, &heartbeatInterval)
	f.DurationVar(&cooldown, "cooldown", 0, "run on this long after the window and measure the turns that started in it (0: those that ended in it)")
	f.StringVar(&format, "format", "table", "output format: table, json or csv")
	f.StringVar(&out, "out", "", "directory for results.json, table.txt and one NDJSON file of turn records per run")
	f.IntVar(&parallel, "parallel", 0, "runs at once (default: one per CPU)")
	f.StringVar(&trace, "trace", "", "replay a trace instead of sessions: Mooncake JSONL or Azure CSV")
	f.StringVar(&traceFormat, "trace-format", "auto", "trace format: mooncake, azure or auto (.csv is azure)")
	f.BoolVar(&reuseCeiling, "reuse-ceiling", false, "print the trace's prefix reuse under one unbounded cache (requests after --warmup) and exit")
	f.Float64Var(&traceRate, "trace-rate", 0, "scale the trace's arrival times to this mean rate in req/s (0: as recorded)")
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseFloats(flag, s string) ([]float64, error) {
	var out []float64
	for _, p := range splitList(s) {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0) || v > 1e6 {
			return nil, usagef("%s %q: want positive numbers up to 1e6, comma separated", flag, p)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, usagef("%s is empty", flag)
	}
	return out, nil
}

func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, p := range splitList(s) {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, usagef("--seed %q: want non-negative integers, comma separated", p)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, usagef("--seed is empty")
	}
	return out, nil
}

func writeSimFiles(dir string, specs []study.RunSpec, res *study.Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for i, run := range res.Runs {
		// The index keeps names apart when two fleet files share a name.
		name := fmt.Sprintf("records-%03d-%s.ndjson", i+1, sanitize(specs[i].Label()))
		if err := study.WriteFile(dir, name, func(w io.Writer) error { return metrics.WriteNDJSON(w, run.Records) }); err != nil {
			return err
		}
	}
	if err := study.WriteFile(dir, "results.json", res.WriteJSON); err != nil {
		return err
	}
	t := study.RunsTable(res.Runs)
	return study.WriteFile(dir, "table.txt", t.WriteText)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ' ' {
			return '_'
		}
		return r
	}, s)
}
