package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/plan"
	"github.com/stargate-llm/stargate/report"
)

// defaultCompareRouters are the pool routers compare-routers runs unless
// told otherwise.
var defaultCompareRouters = []string{"length", "length:estimate=mean", "compress-and-route:gamma=1.5", "spillover", "least-loaded", "random"}

func (f *planFlags) registerPoolRouter(cmd *cobra.Command) {
	fl := cmd.Flags()
	reg := plan.NewPoolRouterRegistry()
	var docs []string
	for _, n := range reg.Names() {
		docs = append(docs, n+" ("+reg.Doc(n)+")")
	}
	fl.StringVar(&f.poolRouter, "pool-router", "length", "how a request's pool is picked, NAME[:key=value,...]: "+strings.Join(docs, "; "))
	fl.StringVar(&f.models, "models", "", "the requests' model mix for the model router, name=share comma separated (e.g. llama-8b=0.7,llama-70b=0.3)")
	fl.StringVar(&f.classifierURL, "classifier-url", "", "the semantic router's classifier: a URL answering POST {\"prompt\",\"input_tokens\",\"category\",\"model\"} with {\"category\": ...} (default: the workload's own categories)")
	fl.DurationVar(&f.classifierTimeout, "classifier-timeout", 200*time.Millisecond, "how long the semantic router waits for the classifier before it falls back")
}

// poolRouterOptions reads the model mix into the workload.
func (f *planFlags) poolRouterOptions(w *plan.Workload) error {
	if f.models == "" {
		return nil
	}
	m, err := plan.ParseModels(f.models)
	if err != nil {
		return usagef("--models: %v", err)
	}
	w.Models = m
	return nil
}

// poolRouterAndClassifier parses --pool-router and --classifier-url.
func (f *planFlags) poolRouterAndClassifier() (plan.PoolRouter, plan.Classifier, error) {
	r, err := plan.ParsePoolRouter(f.poolRouter)
	if err != nil {
		return nil, nil, usagef("--pool-router: %v", err)
	}
	if f.classifierURL == "" {
		return r, nil, nil
	}
	if _, ok := r.(*plan.SemanticRouter); !ok {
		return nil, nil, usagef("--classifier-url goes with --pool-router semantic:...")
	}
	c, err := newHTTPClassifier(f.classifierURL, f.classifierTimeout)
	if err != nil {
		return nil, nil, usageError{err}
	}
	return r, c, nil
}

// gammaRouters are the compress-and-route routers of --gamma (nil if it
// was not given); many is whether a list is allowed.
func (f *planFlags) gammaRouters(cmd *cobra.Command, gamma string, many bool) ([]plan.PoolRouter, error) {
	if gamma == "" {
		return nil, nil
	}
	spec := f.poolRouter
	if !cmd.Flags().Changed("pool-router") {
		spec = "compress-and-route"
	}
	name, params, _ := strings.Cut(spec, ":")
	if name != "compress-and-route" {
		return nil, usagef("--gamma goes with --pool-router compress-and-route, not %s", name)
	}
	if strings.Contains(params, "gamma=") {
		return nil, usagef("give gamma once: in --pool-router or in --gamma")
	}
	gs := splitList(gamma)
	if len(gs) > 1 && !many {
		return nil, usagef("--gamma %q: give one value here (plan optimize searches a list)", gamma)
	}
	var out []plan.PoolRouter
	for _, g := range gs {
		full := "compress-and-route:gamma=" + g
		if params != "" {
			full += "," + params
		}
		r, err := plan.ParsePoolRouter(full)
		if err != nil {
			return nil, usagef("--gamma: %v", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// layoutPoolNames are the pool names plan optimize gives its layouts.
func (f *planFlags) layoutPoolNames() []string {
	switch f.layout {
	case "single":
		return []string{"all"}
	case "two":
		return []string{"short", "long"}
	}
	return []string{"all", "short", "long"}
}

func fleetPoolNames(fl plan.Fleet) []string {
	out := make([]string, len(fl.Pools))
	for i, p := range fl.Pools {
		out[i] = p.Name
	}
	return out
}

func checkRouterPools(r plan.PoolRouter, names []string) error {
	if err := plan.CheckPoolRouter(r, names); err != nil {
		return usagef("--pool-router: %v", err)
	}
	return nil
}

// showPoolRouter: some candidate was sized with a pool router other than
// the length oracle, so the tables name each candidate's.
func showPoolRouter(res *plan.Optimized) bool {
	for _, c := range res.Candidates {
		if c.PoolRouter != "length" {
			return true
		}
	}
	return false
}

// writeRouterLine says which pool router ran and what it compressed or cut.
func writeRouterLine(w io.Writer, e *plan.Eval) {
	fmt.Fprintf(w, "\nPool router %s: %d compressed (P99 TTFT %s s with the compression), %d answers cut at a pool's max context",
		e.PoolRouter, e.Compressed, e.CompressedP99, e.Truncated)
	if e.ClassifierErrors > 0 {
		fmt.Fprintf(w, ", %d classifier failures (fallback)", e.ClassifierErrors)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
}

func newPlanCompareRoutersCmd() *cobra.Command {
	var f planFlags
	var pools, policies string
	var routers []string
	cmd := &cobra.Command{
		Use:   "compare-routers",
		Short: "Run the DES of one fleet with each pool router (how a request's pool is picked)",
		Long: `Run the DES of one fleet with each pool router and show them side by side:
hourly cost, P99 TTFT (failed requests count as infinitely slow), SLO % over
every measured request (rejections in the denominator), requests compressed
or cut, and the share of traffic each pool took. The placement policy inside
the pools is --policy; plan compare-policies compares those.`,
		Example: `  stargate plan compare-routers --cdf examples/plan/chat-cdf.json --lam 20 \
    --pools short:l4-llama3.1-8b:1024:4,long:h100-llama3.1-8b:32768:3
  stargate plan compare-routers --cdf examples/plan/chat-cdf.json --lam 20 --pools ... \
    --routers length --routers compress-and-route:gamma=2,latency=50ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if policies != "" { // the old meaning of this command
				fmt.Fprintln(cmd.ErrOrStderr(), "stargate: compare-routers --policies is deprecated: use plan compare-policies")
				return comparePolicies(cmd, &f, pools, policies)
			}
			pl, fleet, err := f.plannerFleet(cmd, pools)
			if err != nil {
				return err
			}
			var rs []plan.PoolRouter
			for _, spec := range routers {
				r, err := plan.ParsePoolRouter(spec)
				if err != nil {
					return usagef("--routers: %v", err)
				}
				if err := checkRouterPools(r, fleetPoolNames(fleet)); err != nil {
					return err
				}
				rs = append(rs, r)
			}
			if len(rs) == 0 {
				return usagef("--routers: give at least one pool router")
			}
			evals, err := pl.ComparePoolRouters(cmd.Context(), fleet, rs)
			if err != nil {
				return failure{err}
			}
			if f.format == "json" {
				return writeJSON(cmd.OutOrStdout(), evals)
			}
			return writeRouterComparison(cmd.OutOrStdout(), fmt.Sprintf("Pool routers on %s at %.4g req/s (%s inside the pools, %d seeds)",
				fleet, pl.Workload().Lambda, evals[0].Policy, evals[0].Seeds), evals)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&pools, "pools", "", "pools name:profile:max_tokens:instances, comma separated, by increasing max_tokens")
	cmd.Flags().StringArrayVar(&routers, "routers", defaultCompareRouters, "pool routers to compare, NAME[:key=value,...], one per flag")
	cmd.Flags().StringVar(&policies, "policies", "", "deprecated: use plan compare-policies")
	_ = cmd.Flags().MarkHidden("policies")
	return cmd
}

// newPlanComparePoliciesCmd is the comparison of placement policies inside
// the pools, which plan compare-routers was before it compared pool routers.
func newPlanComparePoliciesCmd() *cobra.Command {
	cmd := newPlanCompareCmd()
	cmd.Use = "compare-policies"
	cmd.Example = `  stargate plan compare-policies --trace traces/mooncake/conversation_trace.jsonl --measure 600s \
    --pools all:h100-llama3.1-8b:200000:4 --policies least-request,round-robin,pulsar-waw`
	return cmd
}

func writeRouterComparison(w io.Writer, title string, evals []*plan.Eval) error {
	t := report.Table{Title: title, Headers: []string{"pool router", "$/hr", "requests", "p50 s", "p99 s", "95% CI", "slo%", "rejected",
		"compressed", "compr. p99 s", "cut", "pool share %", "meets"}}
	for _, e := range evals {
		var shares []string
		for _, p := range e.Pools {
			shares = append(shares, fmt.Sprintf("%s %.1f", p.Name, p.SharePct))
		}
		comp := "-"
		if e.Compressed > 0 {
			comp = e.CompressedP99.String()
		}
		t.Rows = append(t.Rows, []string{e.PoolRouter, fmt.Sprintf("%.2f", e.Cost), strconv.Itoa(e.Requests), e.P50.String(), e.P99.String(),
			e.P99Lo.String() + "-" + e.P99Hi.String(), fmt.Sprintf("%.1f", e.SLOPct), strconv.Itoa(e.Rejected + e.TooLong),
			strconv.Itoa(e.Compressed), comp, strconv.Itoa(e.Truncated), strings.Join(shares, " / "), strconv.FormatBool(e.Pass)})
	}
	return t.WriteText(w)
}

func newPlanEstimateErrorCmd() *cobra.Command {
	var f planFlags
	var estimates string
	cmd := &cobra.Command{
		Use:   "estimate-error",
		Short: "How well an output estimate known at request time stands in for the real length when routing by length",
		Long: `The length router's oracle routes by total tokens (prompt plus output), which
no live router knows before generation. A deployable variant routes by the
prompt's tokens plus an output estimate (length:estimate=mean, median or N).
This measures each estimate on the workload (every request of a trace, or
3,000 CDF samples): its mean and median absolute error in output tokens and,
at each short-pool threshold (--thresholds), the share of requests it puts
in the short pool although their total does not fit (their answer would be
cut) and the share it sends to the long pool although they fit the short.`,
		Example: `  stargate plan estimate-error --trace traces/mooncake/conversation_trace.jsonl --thresholds 4096,16384`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rs []*plan.LengthRouter
			for _, e := range splitList(estimates) {
				r, err := plan.ParsePoolRouter("length:estimate=" + e)
				if err != nil {
					return usagef("--estimates: %v", err)
				}
				rs = append(rs, r.(*plan.LengthRouter))
			}
			if len(rs) == 0 {
				return usagef("--estimates: give at least one of oracle, mean, median or a number of tokens")
			}
			pl, err := f.planner(cmd)
			if err != nil {
				return err
			}
			c, err := f.choice()
			if err != nil {
				return err
			}
			th := c.Thresholds
			if th == nil {
				w := pl.Workload()
				th = w.Breakpoints()
			}
			res, err := pl.EstimateErrors(rs, th)
			if err != nil {
				return usageError{err}
			}
			w := cmd.OutOrStdout()
			if f.format == "json" {
				return writeJSON(w, res)
			}
			t := report.Table{Title: "Output estimates for length routing: cut = sent short but too long for it, waste = sent long but fits short (% of requests)",
				Headers: []string{"estimate", "tokens", "MAE", "median AE"}}
			for _, x := range th {
				t.Headers = append(t.Headers, fmt.Sprintf("@%d short%%", x), "cut%", "waste%")
			}
			for _, e := range res {
				row := []string{e.Estimate, strconv.Itoa(e.Tokens), fmt.Sprintf("%.0f", e.MAE), strconv.Itoa(e.MedianAE)}
				for _, x := range e.Thresholds {
					row = append(row, fmt.Sprintf("%.1f", x.ShortPct), fmt.Sprintf("%.1f", x.CutPct), fmt.Sprintf("%.1f", x.WastePct))
				}
				t.Rows = append(t.Rows, row)
			}
			return t.WriteText(w)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&estimates, "estimates", "oracle,mean,median", "output estimates, comma separated: oracle, mean, median or a number of tokens")
	return cmd
}

// httpClassifier asks a URL for a request's category: POST a JSON body
// {"prompt", "input_tokens", "category", "model"}, answer {"category": ...}.
// The planner's workloads carry token counts and a category, not text, so
// "prompt" is empty and "category" is the workload's own label; a live
// deployment would send the prompt. Answers are cached by body.
type httpClassifier struct {
	url     string
	timeout time.Duration
	client  *http.Client
	cache   map[string]string
}

func newHTTPClassifier(raw string, timeout time.Duration) (*httpClassifier, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--classifier-url %q: want an http:// or https:// URL", raw)
	}
	if timeout <= 0 || timeout > time.Minute {
		return nil, fmt.Errorf("--classifier-timeout %v: want a duration in (0, 1m]", timeout)
	}
	return &httpClassifier{url: raw, timeout: timeout, client: &http.Client{}, cache: map[string]string{}}, nil
}

type classifyRequest struct {
	Prompt      string `json:"prompt"`
	InputTokens int    `json:"input_tokens"`
	Category    string `json:"category"`
	Model       string `json:"model,omitempty"`
}

// Classify implements plan.Classifier.
func (c *httpClassifier) Classify(ctx context.Context, req plan.PoolRequest) (string, error) {
	body, err := json.Marshal(classifyRequest{InputTokens: req.InputTokens, Category: req.Category.String(), Model: req.Model})
	if err != nil {
		return "", err
	}
	if v, ok := c.cache[string(body)]; ok {
		return v, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("classifier: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(hr)
	if err != nil {
		return "", fmt.Errorf("classifier: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("classifier: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("classifier: status %d", resp.StatusCode)
	}
	var out struct {
		Category string `json:"category"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Category == "" {
		return "", errors.New("classifier: the answer is not {\"category\": \"...\"}")
	}
	c.cache[string(body)] = out.Category
	return out.Category, nil
}
