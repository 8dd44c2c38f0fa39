package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/stargate-llm/stargate/plan"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/report"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/workload"
)

// planFlags are the flags every plan subcommand shares.
type planFlags struct {
	cdf, trace, traceFormat          string
	lam, inputShare, burstiness, cap float64
	mix, pol, seeds, format          string
	slo, warmup, measure             time.Duration
	profiles, shortProfiles, th      string
	longMax                          int
	layout                           string
	parallel                         int
	allSeeds                         bool
	kvReserve                        string
	// pool routers (planrouters.go)
	poolRouter, models, classifierURL string
	classifierTimeout                 time.Duration
}

func (f *planFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.cdf, "cdf", "", "total-token CDF file: JSON [[tokens, fraction], ...]")
	fl.StringVar(&f.trace, "trace", "", "trace file: Mooncake JSONL or Azure CSV (see --trace-format)")
	fl.StringVar(&f.traceFormat, "trace-format", "auto", "trace format: mooncake, azure or auto (.csv is azure, else mooncake)")
	fl.Float64Var(&f.lam, "lam", 0, "arrival rate in req/s (required with --cdf; with --trace the trace is retimed to it, default its own rate)")
	fl.DurationVar(&f.slo, "slo", 2*time.Second, "P99 TTFT target")
	fl.Float64Var(&f.inputShare, "input-share", workload.DefaultInputShare, "share of a CDF total that is input tokens")
	fl.StringVar(&f.mix, "categories", "prose=0.6,code=0.25,rag=0.15", "request category shares (CDF workloads)")
	fl.Float64Var(&f.burstiness, "burstiness", 1, "squared coefficient of variation of the gaps between arrivals: 1 is Poisson, more is burstier (gamma gaps)")
	fl.Float64Var(&f.cap, "util-cap", plan.DefaultUtilizationCap, "highest planned utilization")
	fl.StringVar(&f.pol, "policy", "least-request", "placement policy inside a pool")
	fl.StringVar(&f.seeds, "seeds", "1,2,3", "DES seeds, comma separated (more seeds, tighter confidence interval)")
	fl.DurationVar(&f.warmup, "warmup", 30*time.Second, "DES warm-up, left out of every figure")
	fl.DurationVar(&f.measure, "measure", 120*time.Second, "DES measured window (requests arriving in it are followed to their end)")
	fl.StringVar(&f.profiles, "profile", "h100-llama3.1-8b", "profiles of the single or long pool, comma separated: presets ("+strings.Join(plan.PresetNames(), ", ")+") or YAML files")
	fl.StringVar(&f.shortProfiles, "short-profile", "", "profiles of the short pool, comma separated (default: --profile)")
	fl.StringVar(&f.th, "thresholds", "", "short-pool max tokens to try, comma separated (default: the CDF's breakpoints)")
	fl.IntVar(&f.longMax, "long-max-ctx", 0, "max tokens of the long (or only) pool (default: the workload's longest request); longer requests are rejected")
	fl.StringVar(&f.layout, "layout", "any", "pool layouts: single, two or any")
	fl.StringVar(&f.format, "format", "table", "output format: table or json")
	fl.IntVar(&f.parallel, "parallel", 0, "DES runs at once (default: one per CPU)")
	fl.StringVar(&f.kvReserve, "kv-reserve", "mean", "how the analytical model sizes slots from the KV cache: mean (KV / the mean request), max-context (KV / the pool's max context on every slot, as the Fleet Sim model does; caps the DES engine too) or paged (KV / the tokens in flight at their 99th percentile, as vLLM's paged attention admits)")
	fl.BoolVar(&f.allSeeds, "all-seeds", false, "verify every fleet with every seed (default: stop a fleet's seeds once its outcome against the target is decided)")
	f.registerPoolRouter(cmd)
}

func loadPlanProfile(name string) (*plan.Profile, error) {
	if p, ok := plan.Preset(name); ok {
		return p, nil
	}
	data, err := readSmall(name, 1<<20)
	if errors.Is(err, os.ErrNotExist) {
		return nil, usagef("profile %q is neither a preset (%s) nor a file", name, strings.Join(plan.PresetNames(), ", "))
	}
	if err != nil {
		return nil, usageError{err}
	}
	p, err := plan.ParseProfile(name, data)
	if err != nil {
		return nil, usageError{err}
	}
	return p, nil
}

func loadPlanProfiles(list string) ([]*plan.Profile, error) {
	var out []*plan.Profile
	for _, n := range splitList(list) {
		p, err := loadPlanProfile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, usagef("give at least one profile")
	}
	return out, nil
}

// readSmall reads a file of at most limit bytes.
func readSmall(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// readTrace reads a Mooncake or Azure trace.
func readTrace(path, format string) ([]workload.TraceRequest, error) {
	if format == "auto" {
		format = "mooncake"
		if strings.HasSuffix(strings.ToLower(path), ".csv") {
			format = "azure"
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("trace: %w", err)}
	}
	defer func() { _ = f.Close() }()
	var reqs []workload.TraceRequest
	switch format {
	case "mooncake":
		reqs, err = workload.ReadMooncake(f)
	case "azure":
		reqs, err = workload.ReadAzure(f)
	default:
		return nil, usagef("--trace-format %q: want mooncake, azure or auto", format)
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", path, err)}
	}
	return reqs, nil
}

// planner builds the planner from the shared flags.
func (f *planFlags) planner(cmd *cobra.Command) (*plan.Planner, error) {
	if f.format != "table" && f.format != "json" {
		return nil, usagef("--format %q: want table or json", f.format)
	}
	if (f.cdf == "") == (f.trace == "") {
		return nil, usagef("give --cdf FILE or --trace FILE (one of them)")
	}
	w := plan.Workload{Lambda: f.lam, InputShare: f.inputShare, Burstiness: f.burstiness}
	mix, err := workload.ParseMix(f.mix)
	if err != nil {
		return nil, usageError{err}
	}
	w.Mix = mix
	if f.cdf != "" {
		data, err := readSmall(f.cdf, 8<<20)
		if err != nil {
			return nil, usageError{err}
		}
		if w.CDF, err = workload.ParseCDF(data); err != nil {
			return nil, usageError{fmt.Errorf("%s: %w", f.cdf, err)}
		}
		if f.lam <= 0 {
			return nil, usagef("--lam (req/s) is required with --cdf")
		}
	} else if w.Trace, err = readTrace(f.trace, f.traceFormat); err != nil {
		return nil, err
	}
	seeds, err := parseSeeds(f.seeds)
	if err != nil {
		return nil, err
	}
	if err := f.poolRouterOptions(&w); err != nil {
		return nil, err
	}
	reg := policy.NewRegistry()
	o := plan.DefaultOptions(f.slo)
	o.UtilCap, o.Policy, o.Seeds, o.Warmup, o.Measure, o.Registry = f.cap, f.pol, seeds, f.warmup, f.measure, reg
	o.Run = parallelRunner(reg, f.parallel, cmd.ErrOrStderr())
	o.AllSeeds, o.Batch, o.KVReserve = f.allSeeds, f.parallel, plan.KVReserve(f.kvReserve)
	if o.Batch <= 0 {
		o.Batch = runtime.GOMAXPROCS(0)
	}
	if o.PoolRouter, o.Classifier, err = f.poolRouterAndClassifier(); err != nil {
		return nil, err
	}
	pl, err := plan.New(w, o)
	if err != nil {
		return nil, usageError{err}
	}
	return pl, nil
}

func (f *planFlags) choice() (plan.PoolChoice, error) {
	var c plan.PoolChoice
	var err error
	if c.Long, err = loadPlanProfiles(f.profiles); err != nil {
		return c, err
	}
	c.Short = c.Long
	if f.shortProfiles != "" {
		if c.Short, err = loadPlanProfiles(f.shortProfiles); err != nil {
			return c, err
		}
	}
	if f.th != "" {
		for _, s := range splitList(f.th) {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				return c, usagef("--thresholds %q: want whole numbers of tokens >= 1", s)
			}
			c.Thresholds = append(c.Thresholds, v)
		}
	}
	if f.longMax < 0 {
		return c, usagef("--long-max-ctx must be >= 0")
	}
	c.LongMax = f.longMax
	switch f.layout {
	case "single":
		c.SingleOnly = true
	case "two":
		c.TwoOnly = true
	case "any":
	default:
		return c, usagef("--layout %q: want single, two or any", f.layout)
	}
	return c, nil
}

// parsePools reads name:profile:max_tokens:instances,...
// plannerFleet is the planner of the command's flags and the fleet of
// --pools, which every command that evaluates a given fleet needs.
func (f *planFlags) plannerFleet(cmd *cobra.Command, pools string) (*plan.Planner, plan.Fleet, error) {
	pl, err := f.planner(cmd)
	if err != nil {
		return nil, plan.Fleet{}, err
	}
	fleet, err := parsePools(pools)
	if err != nil {
		return nil, plan.Fleet{}, err
	}
	return pl, fleet, nil
}

func parsePools(s string) (plan.Fleet, error) {
	var f plan.Fleet
	for _, part := range splitList(s) {
		fields := strings.Split(part, ":")
		if len(fields) != 4 {
			return f, usagef("--pools %q: want name:profile:max_tokens:instances, comma separated", part)
		}
		p, err := loadPlanProfile(fields[1])
		if err != nil {
			return f, err
		}
		maxTok, err1 := strconv.Atoi(fields[2])
		n, err2 := strconv.Atoi(fields[3])
		if err1 != nil || err2 != nil || maxTok < 1 || n < 1 || n > 100_000 {
			return f, usagef("--pools %q: max_tokens and instances must be whole numbers >= 1 (instances at most 100000)", part)
		}
		f.Pools = append(f.Pools, plan.PoolSpec{Name: fields[0], Profile: p, MaxTokens: maxTok, Instances: n})
	}
	if len(f.Pools) == 0 {
		return f, usagef("--pools is required: name:profile:max_tokens:instances, comma separated, by increasing max_tokens")
	}
	return f, nil
}

// parallelRunner runs DES configurations on all cores.
func parallelRunner(reg *policy.Registry, parallel int, progress io.Writer) plan.Runner {
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	return func(ctx context.Context, cfgs []sim.Config) ([]*sim.Result, error) {
		out := make([]*sim.Result, len(cfgs))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(parallel)
		for i := range cfgs {
			g.Go(func() error {
				r, err := sim.Run(gctx, cfgs[i], reg)
				out[i] = r
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		return out, nil
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newPlanCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Capacity planning: size pools of GPUs for a workload and check them in the DES",
		Long: `Capacity planning. A fleet is one or two pools of identical instances (a
profile: model, GPUs and serving configuration); a pool router (--pool-router,
length by default) picks each request's pool: by default the pool of smallest
max context that holds its total tokens, and a request longer than every pool
is rejected. Pools are sized analytically (M/G/c, Erlang C and
Kimura's P99 wait; see go doc ./plan) and checked with the discrete-event
simulator that stargate sim runs.

Workloads: --cdf FILE (total-token CDF, JSON [[tokens, fraction], ...]) with
--lam, or --trace FILE (Mooncake JSONL or Azure CSV). Profiles: presets or
YAML files (see go doc ./plan).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("name a subcommand: optimize, simulate, pareto, disagg, compare-routers, compare-policies, whatif, estimate-error (see stargate plan --help)")
		},
	}
	cmd.AddCommand(newPlanOptimizeCmd(), newPlanSimulateCmd(), newPlanParetoCmd(), newPlanDisaggCmd(),
		newPlanComparePoliciesCmd(), newPlanWhatIfCmd(), newPlanCompareRoutersCmd(), newPlanEstimateErrorCmd())
	return cmd
}

func newPlanOptimizeCmd() *cobra.Command {
	var f planFlags
	var topK, show int
	var gamma string
	cmd := &cobra.Command{
		Use:   "optimize",
		Short: "Rank pool layouts by hourly cost and verify the cheapest with the DES",
		Example: `  stargate plan optimize --cdf examples/plan/chat-cdf.json --lam 20 --slo 2s
  stargate plan optimize --trace traces/mooncake/conversation_trace.jsonl --slo 3s --profile h100-llama3.1-8b,a100-llama3.1-8b`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pl, err := f.planner(cmd)
			if err != nil {
				return err
			}
			c, err := f.choice()
			if err != nil {
				return err
			}
			if topK < 1 || show < 1 {
				return usagef("--verify-top and --show must be >= 1")
			}
			if c.Routers, err = f.gammaRouters(cmd, gamma, true); err != nil {
				return err
			}
			if err := checkRouterPools(pl.PoolRouter(), f.layoutPoolNames()); err != nil {
				return err
			}
			res, err := pl.Optimize(cmd.Context(), c, topK)
			if err != nil {
				return failure{err}
			}
			w := cmd.OutOrStdout()
			if f.format == "json" {
				return writeJSON(w, res)
			}
			return writeOptimize(w, res, show)
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&topK, "verify-top", 3, "candidates to verify with the DES, cheapest first")
	cmd.Flags().IntVar(&show, "show", 8, "analytical candidates to list")
	cmd.Flags().StringVar(&gamma, "gamma", "", "compress-and-route's gamma, or several comma separated to search (implies --pool-router compress-and-route)")
	return cmd
}

func writeOptimize(w io.Writer, res *plan.Optimized, show int) error {
	t := report.Table{Title: fmt.Sprintf("Candidates at %.4g req/s, P99 TTFT target %gs (analytical, cheapest first)", res.Lambda, res.SLOS),
		Headers: []string{"fleet (pool:profile:max_tokens:instances)", "$/hr", "p99 s", "max util", "note"}}
	routed := showPoolRouter(res)
	if routed {
		t.Headers = slices.Insert(t.Headers, 1, "pool router")
	}
	for i, c := range res.Candidates {
		if i == show {
			break
		}
		row := []string{c.Fleet.String(), fmt.Sprintf("%.2f", c.Cost), c.P99.String(), fmt.Sprintf("%.2f", c.Util), c.Err}
		if routed {
			row = slices.Insert(row, 1, c.PoolRouter)
		}
		t.Rows = append(t.Rows, row)
	}
	if err := t.WriteText(w); err != nil {
		return err
	}
	v := report.Table{Title: "DES verification (smallest fleet that meets the target; one instance fewer in any pool does not)",
		Headers: []string{"analytical", "verified", "$/hr", "p99 s", "95% CI", "slo%", "reuse%", "rejected", "fleets", "next smaller: p99 s"}}
	if routed {
		v.Headers = slices.Insert(v.Headers, 1, "pool router")
	}
	for _, r := range res.Verified {
		if r.Eval == nil {
			row := []string{r.Candidate.Fleet.String(), "-", "", "", "", "", "", "", strconv.Itoa(r.Sims), r.Note}
			if routed {
				row = slices.Insert(row, 1, r.Candidate.PoolRouter)
			}
			v.Rows = append(v.Rows, row)
			continue
		}
		e := r.Eval
		var smaller []string
		for _, s := range r.Smaller {
			smaller = append(smaller, fmt.Sprintf("%s: %s", s.Fleet, s.P99))
		}
		if len(smaller) == 0 {
			smaller = []string{r.Note}
		}
		row := []string{r.Candidate.Fleet.String(), e.Fleet.String(), fmt.Sprintf("%.2f", e.Cost), e.P99.String(),
			e.P99Lo.String() + "-" + e.P99Hi.String(), fmt.Sprintf("%.1f", e.SLOPct), fmt.Sprintf("%.1f", e.ReusePct),
			strconv.Itoa(e.Rejected + e.TooLong), strconv.Itoa(r.Sims), strings.Join(smaller, "; ")}
		if routed {
			row = slices.Insert(row, 1, e.PoolRouter)
		}
		v.Rows = append(v.Rows, row)
	}
	fmt.Fprintln(w)
	if err := v.WriteText(w); err != nil {
		return err
	}
	if res.Best == nil {
		fmt.Fprintln(w, "\nNo candidate met the target in the DES.")
		return nil
	}
	via := ""
	if routed {
		via = " with pool router " + res.Best.Eval.PoolRouter
	}
	fmt.Fprintf(w, "\nRecommended: %s%s at $%.2f/hr (DES P99 TTFT %ss over %d seeds, %d requests).\n",
		res.Best.Eval.Fleet, via, res.Best.Eval.Cost, res.Best.Eval.P99, res.Best.Eval.Seeds, res.Best.Eval.Requests)
	return nil
}

func writeEvals(w io.Writer, title string, evals []*plan.Eval) error {
	t := report.Table{Title: title, Headers: []string{"fleet", "policy", "$/hr", "requests", "p50 s", "p99 s", "95% CI", "slo%",
		"reuse%", "rejected", "too long", "req/s", "meets"}}
	for _, e := range evals {
		t.Rows = append(t.Rows, []string{e.Fleet.String(), e.Policy, fmt.Sprintf("%.2f", e.Cost), strconv.Itoa(e.Requests),
			e.P50.String(), e.P99.String(), e.P99Lo.String() + "-" + e.P99Hi.String(), fmt.Sprintf("%.1f", e.SLOPct),
			fmt.Sprintf("%.1f", e.ReusePct), strconv.Itoa(e.Rejected), strconv.Itoa(e.TooLong), fmt.Sprintf("%.2f", e.ThroughputRPS),
			strconv.FormatBool(e.Pass)})
	}
	return t.WriteText(w)
}

func newPlanSimulateCmd() *cobra.Command {
	var f planFlags
	var pools, gamma string
	cmd := &cobra.Command{
		Use:     "simulate",
		Short:   "Run the DES for given pool sizes",
		Example: `  stargate plan simulate --cdf examples/plan/chat-cdf.json --lam 20 --pools short:l4-llama3.1-8b:2048:6,long:h100-llama3.1-8b:32768:5`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pl, fleet, err := f.plannerFleet(cmd, pools)
			if err != nil {
				return err
			}
			routers, err := f.gammaRouters(cmd, gamma, false)
			if err != nil {
				return err
			}
			r := pl.PoolRouter()
			if len(routers) > 0 {
				r = routers[0]
			}
			if err := checkRouterPools(r, fleetPoolNames(fleet)); err != nil {
				return err
			}
			e, err := pl.EvaluateWith(cmd.Context(), fleet, pl.Workload().Lambda, "", r)
			if err != nil {
				return failure{err}
			}
			w := cmd.OutOrStdout()
			if f.format == "json" {
				return writeJSON(w, e)
			}
			if err := writeEvals(w, fmt.Sprintf("DES at %.4g req/s, %d seeds", e.Lambda, e.Seeds), []*plan.Eval{e}); err != nil {
				return err
			}
			writeRouterLine(w, e)
			pt := report.Table{Title: "Pools", Headers: []string{"pool", "instances", "requests", "share%", "p99 s", "slo%", "busy%", "reuse%"}}
			for _, p := range e.Pools {
				pt.Rows = append(pt.Rows, []string{p.Name, strconv.Itoa(p.Instances), strconv.Itoa(p.Requests), fmt.Sprintf("%.1f", p.SharePct), p.P99.String(),
					fmt.Sprintf("%.1f", p.SLOPct), fmt.Sprintf("%.1f", p.BusyPct), fmt.Sprintf("%.1f", p.ReusePct)})
			}
			ct := report.Table{Title: "Categories", Headers: []string{"category", "requests", "p99 s"}}
			for _, c := range e.Categories {
				ct.Rows = append(ct.Rows, []string{c.Name, strconv.Itoa(c.Requests), c.P99.String()})
			}
			fmt.Fprintln(w)
			if err := pt.WriteText(w); err != nil {
				return err
			}
			fmt.Fprintln(w)
			return ct.WriteText(w)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&pools, "pools", "", "pools name:profile:max_tokens:instances, comma separated, by increasing max_tokens")
	cmd.Flags().StringVar(&gamma, "gamma", "", "compress-and-route's gamma (implies --pool-router compress-and-route)")
	return cmd
}

func newPlanParetoCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:     "pareto",
		Short:   "Cost against worst-pool P99 TTFT over the short pool's thresholds (analytical)",
		Example: `  stargate plan pareto --cdf examples/plan/chat-cdf.json --lam 20 --short-profile l4-llama3.1-8b`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pl, err := f.planner(cmd)
			if err != nil {
				return err
			}
			c, err := f.choice()
			if err != nil {
				return err
			}
			pts := pl.Pareto(c)
			w := cmd.OutOrStdout()
			if f.format == "json" {
				return writeJSON(w, pts)
			}
			t := report.Table{Title: fmt.Sprintf("Short pool %s, long pool %s at %.4g req/s (analytical)", c.Short[0].Name, c.Long[0].Name, pl.Workload().Lambda),
				Headers: []string{"threshold", "short share", "fleet", "$/hr", "worst p99 s", "pareto", "note"}}
			for _, p := range pts {
				mark := ""
				if !p.Dominated {
					mark = "*"
				}
				t.Rows = append(t.Rows, []string{strconv.Itoa(p.Threshold), fmt.Sprintf("%.3f", p.ShortShare), p.Fleet.String(),
					fmt.Sprintf("%.2f", p.Cost), p.P99.String(), mark, p.Err})
			}
			return t.WriteText(w)
		},
	}
	f.register(cmd)
	return cmd
}

func newPlanDisaggCmd() *cobra.Command {
	var f planFlags
	k := plan.DefaultDisagg()
	cmd := &cobra.Command{
		Use:   "disagg",
		Short: "Size a prefill/decode-disaggregated deployment (phase model, no DES)",
		Long: `Size a deployment of separate prefill and decode workers of one profile (the
first of --profile) with a phase-level model: each phase's throughput per
worker, scaled by a degradation factor, and a TTFT estimate of a factor times
the idle prefill of a mean prompt, plus a KV transfer if --link-gbs is given.
The constants are assumptions; go doc ./plan states them.`,
		Example: `  stargate plan disagg --cdf examples/plan/chat-cdf.json --lam 20 --link-gbs 50`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pl, err := f.planner(cmd)
			if err != nil {
				return err
			}
			c, err := f.choice()
			if err != nil {
				return err
			}
			d, err := pl.Disaggregate(c.Long[0], k)
			if err != nil {
				return usageError{err}
			}
			w := cmd.OutOrStdout()
			if f.format == "json" {
				return writeJSON(w, d)
			}
			fmt.Fprintf(w, "Profile %s: one prefill worker %.2f req/s, one decode worker %.2f req/s (degrade %.2f / %.2f)\n",
				d.Profile, d.PrefillRPS, d.DecodeRPS, k.PrefillDegrade, k.DecodeDegrade)
			fmt.Fprintf(w, "TTFT estimate %ss (factor %.2f, link %g GB/s): meets the %v target: %v\n", d.TTFT, k.TTFTFactor, k.LinkGBs, pl.SLO(), d.TTFTMeet)
			fmt.Fprintf(w, "Fewest workers for %.4g req/s at utilization <= cap: %d prefill + %d decode, $%.2f/hr\n", pl.Workload().Lambda, d.Prefill, d.Decode, d.Cost)
			if d.Aggregated.Err == "" {
				fmt.Fprintf(w, "Aggregated (one pool, analytical): %s, $%.2f/hr\n\n", d.Aggregated.Fleet, d.Aggregated.Cost)
			} else {
				fmt.Fprintf(w, "Aggregated (one pool): %s\n\n", d.Aggregated.Err)
			}
			t := report.Table{Headers: []string{"prefill", "decode", "req/s", "$/hr", "feasible"}}
			for _, p := range d.Grid {
				t.Rows = append(t.Rows, []string{strconv.Itoa(p.Prefill), strconv.Itoa(p.Decode), fmt.Sprintf("%.2f", p.ThroughputRPS),
					fmt.Sprintf("%.2f", p.Cost), strconv.FormatBool(p.Feasible)})
			}
			return t.WriteText(w)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.Float64Var(&k.PrefillDegrade, "prefill-degrade", k.PrefillDegrade, "prefill throughput factor")
	fl.Float64Var(&k.DecodeDegrade, "decode-degrade", k.DecodeDegrade, "decode throughput factor")
	fl.Float64Var(&k.TTFTFactor, "ttft-factor", k.TTFTFactor, "TTFT estimate: this times the idle prefill of a mean prompt")
	fl.Float64Var(&k.LinkGBs, "link-gbs", k.LinkGBs, "KV transfer bandwidth in GB/s (0: no transfer term; needs a computed profile)")
	return cmd
}

func newPlanCompareCmd() *cobra.Command {
	var f planFlags
	var pools, policies string
	cmd := &cobra.Command{
		Use:   "compare-routers",
		Short: "Run the DES of one fleet with each placement policy inside its pools",
		Example: `  stargate plan compare-routers --trace traces/mooncake/conversation_trace.jsonl --measure 600s \
    --pools all:h100-llama3.1-8b:200000:4 --policies least-request,round-robin,pulsar-waw`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return comparePolicies(cmd, &f, pools, policies) },
	}
	f.register(cmd)
	cmd.Flags().StringVar(&pools, "pools", "", "pools name:profile:max_tokens:instances, comma separated, by increasing max_tokens")
	cmd.Flags().StringVar(&policies, "policies", "least-request,round-robin,power-of-two,random,waw,pulsar-waw", "policies to compare")
	return cmd
}

// comparePolicies runs the DES of one fleet with each placement policy.
func comparePolicies(cmd *cobra.Command, f *planFlags, pools, policies string) error {
	pl, fleet, err := f.plannerFleet(cmd, pools)
	if err != nil {
		return err
	}
	if err := checkRouterPools(pl.PoolRouter(), fleetPoolNames(fleet)); err != nil {
		return err
	}
	for _, p := range splitList(policies) {
		if !policy.NewRegistry().Has(p) {
			return usagef("--policies: unknown policy %q (known: %s)", p, strings.Join(policy.NewRegistry().Names(), ", "))
		}
	}
	evals, err := pl.ComparePolicies(cmd.Context(), fleet, splitList(policies))
	if err != nil {
		return failure{err}
	}
	if f.format == "json" {
		return writeJSON(cmd.OutOrStdout(), evals)
	}
	return writeEvals(cmd.OutOrStdout(), fmt.Sprintf("Policies inside the pools (%s routing between them) at %.4g req/s", pl.PoolRouter().Name(), pl.Workload().Lambda), evals)
}

func newPlanWhatIfCmd() *cobra.Command {
	var f planFlags
	var pools, rates string
	cmd := &cobra.Command{
		Use:     "whatif",
		Short:   "Sweep the arrival rate: the cheapest analytical fleet at each rate, and a given fleet in the DES",
		Example: `  stargate plan whatif --cdf examples/plan/chat-cdf.json --lam 20 --rates 10,20,40 --pools all:h100-llama3.1-8b:32768:6`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pl, err := f.planner(cmd)
			if err != nil {
				return err
			}
			c, err := f.choice()
			if err != nil {
				return err
			}
			var fixed plan.Fleet
			if pools != "" {
				if fixed, err = parsePools(pools); err != nil {
					return err
				}
				if err := checkRouterPools(pl.PoolRouter(), fleetPoolNames(fixed)); err != nil {
					return err
				}
			}
			rs, err := parseFloats("--rates", rates)
			if err != nil {
				return err
			}
			pts, err := pl.WhatIf(cmd.Context(), c, rs, fixed)
			if err != nil {
				return failure{err}
			}
			w := cmd.OutOrStdout()
			if f.format == "json" {
				return writeJSON(w, pts)
			}
			t := report.Table{Title: "Rate sweep", Headers: []string{"req/s", "cheapest fleet (analytical)", "$/hr", "p99 s", "note"}}
			if pools != "" {
				t.Headers = append(t.Headers, "given fleet: p99 s", "slo%", "rejected", "meets")
			}
			for _, p := range pts {
				row := []string{strconv.FormatFloat(p.Lambda, 'g', -1, 64), p.Best.Fleet.String(), fmt.Sprintf("%.2f", p.Best.Cost), p.Best.P99.String(), p.Best.Err}
				if p.Fixed != nil {
					row = append(row, p.Fixed.P99.String(), fmt.Sprintf("%.1f", p.Fixed.SLOPct), strconv.Itoa(p.Fixed.Rejected+p.Fixed.TooLong), strconv.FormatBool(p.Fixed.Pass))
				}
				t.Rows = append(t.Rows, row)
			}
			return t.WriteText(w)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&rates, "rates", "", "arrival rates in req/s, comma separated")
	cmd.Flags().StringVar(&pools, "pools", "", "a fleet to simulate at every rate: name:profile:max_tokens:instances, comma separated")
	return cmd
}
