package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/internal/wait"
	"github.com/stargate-llm/stargate/serve/engined"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "proxyload: %v\n", err)
		var u usage
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usage marks errors in the command line.
type usage struct{ error }

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usage{errors.New("want a command: run or table (see proxyload run -h)")}
	}
	switch args[0] {
	case "run":
		return runLoad(args[1:], stdout, stderr)
	case "table":
		return runTable(args[1:], stdout, stderr)
	default:
		return usage{fmt.Errorf("unknown command %q: want run or table", args[0])}
	}
}

// Config is one measurement.
type Config struct {
	URL       string
	Streams   int
	Warmup    time.Duration
	Duration  time.Duration
	MaxTokens int
	// Think is the mean of an exponential pause before each request; zero
	// sends the next request at once.
	Think     time.Duration
	PIDs      []int
	EnginePID int
	Label     string
	Rep       int
	// TLS verifies an https target; nil uses the system's roots.
	TLS *tls.Config
}

// Result is one measurement's figures, printed as one JSON line.
type Result struct {
	Label    string  `json:"label"`
	Rep      int     `json:"rep"`
	URL      string  `json:"url"`
	Streams  int     `json:"streams"`
	ThinkMs  float64 `json:"think_ms"`
	Seconds  float64 `json:"seconds"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	RPS      float64 `json:"rps"`
	TTFTP50  float64 `json:"ttft_p50_ms"`
	TTFTP99  float64 `json:"ttft_p99_ms"`
	TTFTMean float64 `json:"ttft_mean_ms"`
	// Outside is each request's TTFT minus the engine's own time to its
	// first token (stargate engine --stamp-ttft): the client's, the
	// network's and the proxy's share, paired request by request. Zero
	// when the engine did not stamp its streams (Stamped is 0).
	OutsideP50 float64 `json:"outside_p50_ms,omitempty"`
	OutsideP99 float64 `json:"outside_p99_ms,omitempty"`
	Stamped    int     `json:"stamped,omitempty"`
	CPUS       float64 `json:"cpu_s"`
	CPUPerReq  float64 `json:"cpu_us_per_req"`
	EngineCPU  float64 `json:"engine_cpu_us_per_req"`
	LoadCPUS   float64 `json:"loadgen_cpu_s"`
	FirstErr   string  `json:"first_error,omitempty"`
}

func runLoad(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var pids string
	fs.StringVar(&cfg.URL, "url", "", "base URL of the target (POST URL/v1/chat/completions)")
	fs.IntVar(&cfg.Streams, "streams", 200, "concurrent closed-loop clients")
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "time before the measured window")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "length of the measured window")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", 16, "output tokens per request")
	fs.DurationVar(&cfg.Think, "think", 0, "mean of a random (exponential) pause of each client before each request; 0: none")
	fs.StringVar(&pids, "pids", "", "comma-separated PIDs whose CPU the target costs")
	fs.IntVar(&cfg.EnginePID, "engine-pid", 0, "PID of the engine, whose CPU per request is reported apart")
	fs.StringVar(&cfg.Label, "label", "", "name of this target in the table")
	fs.IntVar(&cfg.Rep, "rep", 0, "repetition number (pairs runs of different labels)")
	var caFile string
	fs.StringVar(&caFile, "ca-file", "", "PEM CA that verifies an https target")
	if err := fs.Parse(args); err != nil {
		return usage{err}
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return usage{fmt.Errorf("--ca-file: %w", err)}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return usage{fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)}
		}
		cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	for _, p := range strings.Split(pids, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return usage{fmt.Errorf("--pids: %q is not a process id", p)}
		}
		cfg.PIDs = append(cfg.PIDs, n)
	}
	if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") || cfg.Streams < 1 || cfg.Duration <= 0 || cfg.Warmup < 0 || cfg.MaxTokens < 1 || cfg.Think < 0 {
		return usage{errors.New("need --url http[s]://..., --streams >= 1, --duration > 0, --warmup >= 0 and --max-tokens >= 1")}
	}
	if cfg.Label == "" {
		cfg.Label = cfg.URL
	}
	res, err := Load(context.Background(), cfg)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(res)
	fmt.Fprintf(stdout, "%s\n", b)
	fmt.Fprintf(stderr, "%-10s rep %d: %6.0f req/s, TTFT p50 %6.2f ms p99 %6.2f ms, CPU %5.0f us/req (engine %4.0f), %d errors\n",
		res.Label, res.Rep, res.RPS, res.TTFTP50, res.TTFTP99, res.CPUPerReq, res.EngineCPU, res.Errors)
	return nil
}

// Load runs one measurement.
func Load(ctx context.Context, cfg Config) (*Result, error) {
	tr := &http.Transport{MaxIdleConns: cfg.Streams + 16, MaxIdleConnsPerHost: cfg.Streams + 16,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true, TLSClientConfig: cfg.TLS}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body := fmt.Appendf(nil, `{"model":"stargate-mock","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"Say something short about routers."}]}`, cfg.MaxTokens)
	// One request first: the target must answer before the clock starts.
	if _, err := request(ctx, client, cfg.URL, body, "probe"); err != nil {
		return nil, fmt.Errorf("%s does not answer a streamed chat request: %w", cfg.URL, err)
	}
	start := time.Now()
	from, to := start.Add(cfg.Warmup), start.Add(cfg.Warmup+cfg.Duration)
	runCtx, cancel := context.WithDeadline(ctx, to)
	defer cancel()
	var mu sync.Mutex
	var ttfts, outside []time.Duration
	errs, firstErr := 0, ""
	var cpu0, cpu1, eng0, eng1, self0, self1 float64
	var cpuErr error
	startCPU := time.AfterFunc(cfg.Warmup, func() {
		mu.Lock()
		defer mu.Unlock()
		cpu0, cpuErr = cpuSeconds(cfg.PIDs)
		eng0, _ = cpuSeconds(nonZero(cfg.EnginePID))
		self0, _ = cpuSeconds([]int{os.Getpid()})
	})
	defer startCPU.Stop()
	var wg sync.WaitGroup
	for i := range cfg.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := "bench-" + strconv.Itoa(i)
			rng := rand.New(rand.NewPCG(uint64(i), 0x70726f78))
			var mine, mineOut []time.Duration
			for runCtx.Err() == nil {
				if cfg.Think > 0 && !wait.For(runCtx, time.Duration(rng.ExpFloat64()*float64(cfg.Think))) {
					break
				}
				t0 := time.Now()
				tm, err := request(runCtx, client, cfg.URL, body, session)
				end := time.Now()
				if runCtx.Err() != nil || t0.Before(from) || end.After(to) {
					continue
				}
				if err != nil {
					mu.Lock()
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
					mu.Unlock()
					continue
				}
				mine = append(mine, tm.ttft)
				if tm.stamped {
					mineOut = append(mineOut, tm.ttft-tm.engine)
				}
			}
			mu.Lock()
			ttfts, outside = append(ttfts, mine...), append(outside, mineOut...)
			mu.Unlock()
		}()
	}
	<-runCtx.Done()
	mu.Lock()
	cpu1, err := cpuSeconds(cfg.PIDs)
	eng1, _ = cpuSeconds(nonZero(cfg.EnginePID))
	self1, _ = cpuSeconds([]int{os.Getpid()})
	mu.Unlock()
	wg.Wait()
	if err = errors.Join(err, cpuErr); err != nil {
		return nil, err
	}
	slices.Sort(ttfts)
	slices.Sort(outside)
	n := len(ttfts)
	res := &Result{Label: cfg.Label, Rep: cfg.Rep, URL: cfg.URL, Streams: cfg.Streams, ThinkMs: ms(cfg.Think), Seconds: cfg.Duration.Seconds(),
		Requests: n, Errors: errs, RPS: float64(n) / cfg.Duration.Seconds(), CPUS: cpu1 - cpu0,
		LoadCPUS: self1 - self0, FirstErr: firstErr}
	if n > 0 {
		res.TTFTP50, res.TTFTP99 = ms(percentile(ttfts, 0.50)), ms(percentile(ttfts, 0.99))
		var sum time.Duration
		for _, t := range ttfts {
			sum += t
		}
		res.TTFTMean = ms(sum / time.Duration(n))
		if res.Stamped = len(outside); res.Stamped > 0 {
			res.OutsideP50, res.OutsideP99 = ms(percentile(outside, 0.50)), ms(percentile(outside, 0.99))
		}
		res.CPUPerReq = 1e6 * res.CPUS / float64(n)
		res.EngineCPU = 1e6 * (eng1 - eng0) / float64(n)
	}
	return res, nil
}

func nonZero(pid int) []int {
	if pid == 0 {
		return nil
	}
	return []int{pid}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

var (
	dataPrefix = []byte("data: ")
	doneEvent  = []byte("[DONE]")
)

// timing is one request's time to its first token, and the engine's own
// share of it when the engine stamped its stream.
type timing struct {
	ttft, engine time.Duration
	stamped      bool
}

// request sends one streamed chat request and reads it to the end.
func request(ctx context.Context, client *http.Client, url string, body []byte, session string) (timing, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return timing{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", session)
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return timing{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return timing{}, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return readStream(resp.Body, t0)
}

// stampPrefix starts the SSE comment of an engine run with --stamp-ttft.
var stampPrefix = []byte(engined.TTFTStamp)

// readStream reads an SSE stream to [DONE]; it times the first event with
// non-empty delta content from t0, and takes the engine's stamp of its own
// time to that event if one comes before it.
func readStream(r io.Reader, t0 time.Time) (timing, error) {
	br := bufio.NewReaderSize(r, 4096)
	var tm timing
	first := false
	for {
		line, err := br.ReadSlice('\n')
		trimmed := bytes.TrimRight(line, "\r\n")
		if us, ok := bytes.CutPrefix(trimmed, stampPrefix); ok && !first {
			n, perr := strconv.ParseInt(string(us), 10, 64)
			if perr != nil || n < 0 {
				return timing{}, fmt.Errorf("bad engine stamp %q", trimmed)
			}
			tm.engine, tm.stamped = time.Duration(n)*time.Microsecond, true
		}
		if data, ok := bytes.CutPrefix(trimmed, dataPrefix); ok {
			switch {
			case bytes.Equal(data, doneEvent):
				if !first {
					return timing{}, errors.New("stream ended without content")
				}
				// Read on to the end of the body, as a keep-alive client
				// does: a body closed before its end takes its connection
				// with it, and every next request would pay for a new one.
				_, _ = io.Copy(io.Discard, br)
				return tm, nil
			case !first:
				c, err := firstContent(data)
				if err != nil {
					return timing{}, err
				}
				if c {
					tm.ttft, first = time.Since(t0), true
				}
			}
		}
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return timing{}, fmt.Errorf("stream cut before [DONE]: %w", err)
		}
	}
}

// firstContent reports whether an SSE event carries delta content; an error
// event is an error.
func firstContent(data []byte) (bool, error) {
	var ev struct {
		Error   *struct{ Message string } `json:"error"`
		Choices []struct {
			Delta struct{ Content string } `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return false, fmt.Errorf("bad SSE event: %w", err)
	}
	if ev.Error != nil {
		return false, fmt.Errorf("in-stream error: %s", ev.Error.Message)
	}
	return len(ev.Choices) > 0 && ev.Choices[0].Delta.Content != "", nil
}

// userHZ is Linux's clock tick for /proc times.
const userHZ = 100

// cpuSeconds sums utime+stime of the processes.
func cpuSeconds(pids []int) (float64, error) {
	total := 0.0
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
		}
		s, err := parseStat(b)
		if err != nil {
			return 0, fmt.Errorf("process %d: %w", pid, err)
		}
		total += s
	}
	return total, nil
}

// parseStat returns utime+stime in seconds from /proc/PID/stat.
func parseStat(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc stat without a command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state(3) ... utime(14) stime(15), so indexes 11 and 12.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat has %d fields after the name, want at least 13", len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat times: %w", err)
	}
	return float64(u+s) / userHZ, nil
}
