package drive

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/internal/mix"
	"github.com/stargate-llm/stargate/internal/wait"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/serve/wire"
	"github.com/stargate-llm/stargate/workload"
)

// Config describes one driver run.
type Config struct {
	// Targets are router base URLs; TargetRegion[i] (optional) is target i's
	// region, written into the records.
	Targets      []string
	TargetRegion []int
	RPS          float64
	Warmup       time.Duration
	Measure      time.Duration
	// Cooldown, if positive, drives on for this long after the measured
	// window: the records are then the turns that started in the window,
	// and those still running at the end are Result.Unfinished.
	Cooldown time.Duration
	Seed     uint64
	// Class, when set, replaces the sessions with the class's open loop at
	// RPS requests/s. Its stream starts Class.Lead before the warm-up, and
	// every time in the records is shifted by the lead, as in the simulator.
	Class *workload.Class
	// Clients, when > 0, replaces the session arrivals with a closed loop of
	// that many clients (RPS is unused): each runs one session at a time,
	// starts at an instant drawn in the first second, and begins its next
	// session a think time after one ends.
	Clients int
	// Plan, when set, replaces the Poisson session arrivals: each call
	// returns the next session, in arrival order, with the target it goes
	// to. A caller matching a simulator run passes the simulator's own
	// sessions (sim.SessionPlan), so that both play the same sessions at the
	// same instants. RPS then only sizes the collector.
	Plan     func() Planned
	Workload workload.Config
	Client   client.Config
	Model    string
	APIKey   string
	// Progress, if set, is called about once a second with the time elapsed.
	Progress func(elapsed time.Duration)
	// Transport is the HTTP transport; nil means a pooled default.
	Transport http.RoundTripper
	// Bursts add sessions at once (see Bursts).
	Bursts Bursts
	// Started, if set, hears the instant the run's clock starts: time zero
	// of the records and of Bursts.
	Started func(time.Time)
}

// Planned is one session of a Config.Plan: when it starts (from the run's
// time zero), its turns and the index of the target it goes to.
type Planned struct {
	At      time.Duration
	Session *workload.Session
	Target  int
}

// Result is a run's measured window.
type Result struct {
	Summary metrics.Summary
	Records []metrics.TurnRecord
	// Unfinished are the measured turns still running at the end of a run
	// with a cool-down; End is when the run ended.
	Unfinished []metrics.TurnRecord
	Backends   []string // backend names by the index used in Records
}

// MaxClients bounds a closed loop.
const MaxClients = 100_000

// Validate reports what is wrong with a configuration.
func (c Config) Validate() error {
	var errs []error
	if len(c.Targets) == 0 {
		errs = append(errs, errors.New("no target; give --target URL"))
	}
	for _, t := range c.Targets {
		if !strings.HasPrefix(t, "http://") && !strings.HasPrefix(t, "https://") {
			errs = append(errs, fmt.Errorf("target %q is not an http(s) URL", t))
		}
	}
	switch {
	case c.Clients < 0 || c.Clients > MaxClients:
		errs = append(errs, fmt.Errorf("clients must be 0 (open arrivals) to %d, got %d", MaxClients, c.Clients))
	case c.Clients > 0 && c.Class != nil:
		errs = append(errs, errors.New("clients (a closed loop of sessions) and a workload class each replace the sessions; use one"))
	case c.Plan != nil && (c.Clients > 0 || c.Class != nil):
		errs = append(errs, errors.New("a session plan replaces the Poisson sessions only; drop the plan or the clients and class"))
	case c.Clients > 0: // a closed loop has no rate
	case !(c.RPS > 0) || c.RPS > 10_000:
		errs = append(errs, fmt.Errorf("rps must be in (0, 10000], got %v", c.RPS))
	}
	if c.Warmup < 0 || c.Measure <= 0 || c.Cooldown < 0 {
		errs = append(errs, fmt.Errorf("warmup and cooldown must be >= 0 and measure > 0, got %v, %v and %v", c.Warmup, c.Cooldown, c.Measure))
	}
	if err := c.Workload.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Client.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Bursts.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("drive: %w", err)
	}
	return nil
}

type driver struct {
	cfg    Config
	client *http.Client
	start  time.Time
	end    time.Duration // when the run stops, from start
	wg     sync.WaitGroup

	mu       sync.Mutex
	coll     *metrics.Collector
	backends map[string]int
	names    []string
	// A class's conversations: requests in flight per session, and the
	// turns held until the one before them ends.
	busy map[uint64]int
	held map[uint64][]workload.Request
}

// Run drives the targets for warmup+measure (and the cool-down, and a
// class's lead) and returns the measured window.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr := cfg.Transport
	if tr == nil {
		tr = &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	}
	var lead time.Duration
	if cfg.Class != nil {
		lead = cfg.Class.Lead
	}
	from, to := lead+cfg.Warmup, lead+cfg.Warmup+cfg.Measure
	expected := int(cfg.RPS*cfg.Measure.Seconds()) + 16
	d := &driver{cfg: cfg, client: &http.Client{Transport: tr}, start: time.Now(), end: to + cfg.Cooldown,
		coll: metrics.NewCollector(from, to, cfg.Client.TTFTSLO, expected), backends: make(map[string]int),
		busy: make(map[uint64]int), held: make(map[uint64][]workload.Request)}
	if cfg.Cooldown > 0 {
		d.coll.SampleStarts()
	}
	runCtx, cancel := context.WithTimeout(ctx, d.end)
	defer cancel()
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	if cfg.Started != nil {
		cfg.Started(d.start)
	}
	d.startBursts(runCtx, &d.wg)
	var err error
	switch {
	case cfg.Class != nil:
		err = d.classLoop(runCtx, progress, lead)
	case cfg.Clients > 0:
		d.closedLoop(runCtx)
	case cfg.Plan != nil:
		err = d.planLoop(runCtx, progress)
	default:
		err = d.sessionLoop(runCtx, progress)
	}
	if err != nil {
		return nil, fmt.Errorf("drive: %w", err)
	}
	d.sleepUntil(runCtx, d.end, progress)
	cancel()
	d.wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("drive: stopped: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return &Result{Summary: d.coll.Summary(), Records: d.coll.Records(), Unfinished: d.coll.UnfinishedRecords(), Backends: d.names}, nil
}

// sessionLoop starts the Poisson sessions until the end of the run.
func (d *driver) sessionLoop(ctx context.Context, progress *time.Ticker) error {
	rng := rand.New(rand.NewPCG(d.cfg.Seed, 0x64726976))
	arrivals, err := workload.NewArrivals(d.cfg.Workload.SessionRate(d.cfg.RPS), rng)
	if err != nil {
		return err
	}
	var next time.Duration
	for id := uint64(1); ; id++ {
		next = arrivals.Next(next)
		if next >= d.end || !d.sleepUntil(ctx, next, progress) {
			return nil
		}
		target := int(id-1) % len(d.cfg.Targets)
		d.wg.Go(func() { d.session(ctx, d.cfg.Workload.NewSession(d.cfg.Seed, id), target) })
	}
}

// planLoop starts the sessions of Config.Plan until the end of the run.
func (d *driver) planLoop(ctx context.Context, progress *time.Ticker) error {
	for {
		p := d.cfg.Plan()
		if p.At >= d.end || !d.sleepUntil(ctx, p.At, progress) {
			return nil
		}
		if p.Session == nil || p.Target < 0 || p.Target >= len(d.cfg.Targets) {
			return fmt.Errorf("planned session at %v: no session or target %d not in [0, %d)", p.At, p.Target, len(d.cfg.Targets))
		}
		d.wg.Go(func() { d.session(ctx, p.Session, p.Target) })
	}
}

// closedLoop starts the clients; each plays sessions until the run ends.
func (d *driver) closedLoop(ctx context.Context) {
	rng := rand.New(rand.NewPCG(d.cfg.Seed, 0x636c6f73))
	var mu sync.Mutex
	var nextID uint64
	for c := range d.cfg.Clients {
		startAt := time.Duration(rng.Int64N(int64(time.Second)))
		target := c % len(d.cfg.Targets)
		d.wg.Go(func() {
			if !wait.For(ctx, startAt-d.now()) {
				return
			}
			for {
				mu.Lock()
				nextID++
				id := nextID
				mu.Unlock()
				ws := d.cfg.Workload.NewSession(d.cfg.Seed, id)
				if !d.session(ctx, ws, target) || !wait.For(ctx, ws.ThinkTime()) {
					return
				}
			}
		})
	}
}

// classLoop sends the class's requests on their schedule until the end of
// the run; the stream's time zero is lead into the run.
func (d *driver) classLoop(ctx context.Context, progress *time.Ticker, lead time.Duration) error {
	stream, err := d.cfg.Class.Stream(d.cfg.RPS, d.cfg.Seed)
	if err != nil {
		return err
	}
	for {
		r := stream.Next()
		at := lead + r.At
		if at >= d.end || !d.sleepUntil(ctx, at, progress) {
			return nil
		}
		d.mu.Lock()
		hold := r.Follows && d.busy[r.Session] > 0
		if hold {
			d.held[r.Session] = append(d.held[r.Session], r)
		}
		d.mu.Unlock()
		if !hold {
			d.startRequest(ctx, r)
		}
	}
}

// startRequest sends one request of a class as a turn of its own; when it
// ends, the next held turn of its conversation goes.
func (d *driver) startRequest(ctx context.Context, r workload.Request) {
	if r.Follows {
		d.mu.Lock()
		d.busy[r.Session]++
		d.mu.Unlock()
	}
	target := int(mix.Mix64(r.Session^d.cfg.Seed) % uint64(len(d.cfg.Targets)))
	d.wg.Go(func() {
		d.turn(ctx, r.Session, r.Turn, target)
		if !r.Follows || ctx.Err() != nil {
			return
		}
		d.mu.Lock()
		d.busy[r.Session]--
		var next *workload.Request
		if d.busy[r.Session] == 0 {
			delete(d.busy, r.Session)
			if q := d.held[r.Session]; len(q) > 0 {
				next = &q[0]
				if len(q) == 1 {
					delete(d.held, r.Session)
				} else {
					d.held[r.Session] = q[1:]
				}
			}
		}
		d.mu.Unlock()
		if next != nil {
			d.startRequest(ctx, *next)
		}
	})
}

func (d *driver) now() time.Duration { return time.Since(d.start) }

// sleepUntil waits until offset at of the run, reporting progress; false if
// ctx ended.
func (d *driver) sleepUntil(ctx context.Context, at time.Duration, progress *time.Ticker) bool {
	for {
		wait := at - d.now()
		if wait <= 0 {
			return true
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-progress.C:
			timer.Stop()
			if d.cfg.Progress != nil {
				d.cfg.Progress(d.now())
			}
		case <-timer.C:
			return true
		}
	}
}

// session plays one session's turns until it ends, after its last turn or
// a turn that failed; false if the run ended first.
func (d *driver) session(ctx context.Context, ws *workload.Session, target int) bool {
	for {
		t, ok := ws.Next()
		if !ok {
			return true
		}
		rec, ok := d.turn(ctx, ws.ID, t, target)
		if !ok {
			return false
		}
		if !rec.Completed {
			return true // a turn that failed after its attempts ends its session
		}
		if !wait.For(ctx, ws.ThinkTime()) {
			return false
		}
	}
}

// turn plays one turn with its attempts and records it; false if the run
// ended first (the turn is then unfinished).
func (d *driver) turn(ctx context.Context, session uint64, t workload.Turn, target int) (metrics.TurnRecord, bool) {
	region := 0
	if target < len(d.cfg.TargetRegion) {
		region = d.cfg.TargetRegion[target]
	}
	start := d.now()
	d.mu.Lock()
	d.coll.TurnStarted(start)
	d.mu.Unlock()
	turn := d.cfg.Client.NewTurn(start, metrics.TurnRecord{Session: session, Turn: t.Index, Region: region,
		Router: target, Backend: -1, PromptTokens: t.PromptTokens})
	body := requestBody(d.cfg.Model, session, t)
	for !turn.Done() {
		deadline := turn.Attempt(d.now())
		res := d.attempt(ctx, d.cfg.Targets[target], session, body, deadline, &turn)
		if ctx.Err() != nil {
			return d.unfinished(turn.Record), false
		}
		if res.ok {
			turn.Complete(d.now(), res.backend, res.cached, res.output)
			break
		}
		retryAt, retry := turn.Fail(d.now(), res.failure, res.backend)
		if retry && !wait.For(ctx, retryAt-d.now()) {
			return d.unfinished(turn.Record), false
		}
	}
	d.mu.Lock()
	d.coll.Add(turn.Record)
	d.mu.Unlock()
	return turn.Record, true
}

// unfinished records a turn the end of the run cut short.
func (d *driver) unfinished(rec metrics.TurnRecord) metrics.TurnRecord {
	rec.End = d.end
	d.mu.Lock()
	d.coll.Unfinished(rec)
	d.mu.Unlock()
	return rec
}

// requestBody is a turn's chat request: one user message of exactly the
// turn's prompt tokens (4 for the message, 4 bytes a token for the text).
func requestBody(model string, session uint64, t workload.Turn) []byte {
	textTokens := max(t.PromptTokens-4, 1)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"model":%q,"stream":true,"stream_options":{"include_usage":true},"max_tokens":%d,"messages":[{"role":"user","content":"`,
		model, t.OutputTokens)
	seed := fmt.Sprintf("session %d turn %d ", session, t.Index)
	for i := 0; i < textTokens*4; i++ {
		b.WriteByte(seed[i%len(seed)])
	}
	b.WriteString(`"}]}`)
	return b.Bytes()
}

type attemptResult struct {
	ok             bool
	failure        client.Failure
	reason         string
	backend        int
	cached, output int
}

// attempt sends one attempt and reads its stream.
func (d *driver) attempt(ctx context.Context, target string, session uint64, body []byte, deadline time.Duration, turn *client.Turn) attemptResult {
	actx, cancel := context.WithTimeout(ctx, max(deadline-d.now(), time.Millisecond))
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, target+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return attemptResult{failure: client.Errored, reason: err.Error(), backend: -1}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", strconv.FormatUint(session, 10))
	if d.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.cfg.APIKey)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return d.failed(actx, ctx, -1, "request: "+err.Error())
	}
	defer resp.Body.Close()
	backend := d.backendIndex(resp.Header.Get(wire.HeaderBackend))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return attemptResult{failure: client.Rejected, reason: "rejected: " + resp.Status, backend: backend}
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		f := client.Errored
		if resp.StatusCode == http.StatusBadRequest {
			f = client.Invalid // over the context length: not worth retrying
		}
		return attemptResult{failure: f, reason: fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(msg)), backend: backend}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	first := false
	res := attemptResult{backend: backend}
	for sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(line) == "[DONE]" {
			if !first {
				return attemptResult{failure: client.Errored, reason: "stream ended without a token", backend: backend}
			}
			res.ok = true
			return res
		}
		var ev struct {
			Error   *struct{ Message string } `json:"error"`
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
				Details          *struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			return attemptResult{failure: client.Errored, reason: "bad SSE event: " + err.Error(), backend: backend}
		}
		if ev.Error != nil {
			return attemptResult{failure: client.Errored, reason: "in-stream error: " + ev.Error.Message, backend: backend}
		}
		if !first && len(ev.Choices) > 0 && ev.Choices[0].Delta.Content != "" {
			first = true
			turn.FirstToken(d.now())
		}
		if ev.Usage != nil {
			res.output = ev.Usage.CompletionTokens
			if ev.Usage.Details != nil {
				res.cached = ev.Usage.Details.Cached
			}
		}
	}
	return d.failed(actx, ctx, backend, fmt.Sprintf("stream cut: %v", sc.Err()))
}

// failed classifies an attempt that broke: a timeout if its own deadline
// passed, else an error.
func (d *driver) failed(actx, runCtx context.Context, backend int, reason string) attemptResult {
	if runCtx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		return attemptResult{failure: client.TimedOut, reason: "attempt timed out", backend: backend}
	}
	return attemptResult{failure: client.Errored, reason: reason, backend: backend}
}

func (d *driver) backendIndex(name string) int {
	if name == "" {
		return -1
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	i, ok := d.backends[name]
	if !ok {
		i = len(d.names)
		d.backends[name] = i
		d.names = append(d.names, name)
	}
	return i
}
