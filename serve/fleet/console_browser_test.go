package fleet

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/auth"
)

// consoleShows is how soon the console must show a change the router or a
// gateway knows of (the bound docs/console.md promises).
const consoleShows = 2 * time.Second

// findBrowser returns a Chromium to drive: $CHROME, else chromium or
// chromium-browser on the PATH.
func findBrowser() (string, bool) {
	if p := os.Getenv("CHROME"); p != "" {
		return p, true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// TestConsoleInBrowser drives the operator console in headless Chromium:
// a live fleet under load, the page open, one backend drained and another
// backend's engine killed mid-stream. The page must show the drained state
// within 2 s of the drain, and the quarantine within 2 s of its gateway
// knowing it. It saves a screenshot into $STARGATE_SCREENSHOT_DIR or the
// test's temporary directory.
//
// STARGATE_CONSOLE_FLEET picks another preset (three-site, for the
// documentation's picture) and STARGATE_CONSOLE_WARMUP (a duration) lets
// the load run that long before the faults, so the chart has a history.
func TestConsoleInBrowser(t *testing.T) {
	browser, ok := findBrowser()
	if !ok {
		t.Skip("no Chromium found (install Debian's chromium, or set $CHROME to a Chrome or Chromium binary)")
	}
	preset := cmp.Or(os.Getenv("STARGATE_CONSOLE_FLEET"), "small")
	warmup := 2 * time.Second
	if v := os.Getenv("STARGATE_CONSOLE_WARMUP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("STARGATE_CONSOLE_WARMUP=%q: %v", v, err)
		}
		warmup = d
	}
	dir := os.Getenv("STARGATE_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}

	reg := policy.NewRegistry()
	fl, ok := config.Preset(preset)
	if !ok {
		t.Fatalf("STARGATE_CONSOLE_FLEET=%q: no such preset (%s)", preset, strings.Join(config.PresetNames(), ", "))
	}
	cfg, err := fl.SimConfig(config.Run{Policy: "pressure", RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	f, err := Start(ctx, cfg, reg, Options{Seed: 1, Console: true, RoutersPerRegion: 1})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	drained, killed := cfg.Backends[0].Name, len(cfg.Backends)-1
	killedName := cfg.Backends[killed].Name

	// Load through the first router, so that the chart and the shares move.
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var load sync.WaitGroup
	t.Cleanup(func() { stopLoad(); load.Wait() })
	for w := range 2 * len(cfg.Backends) {
		load.Go(func() { sendLoad(loadCtx, f.RouterURLs[0], w) })
	}

	// The browser, closed before the fleet stops (cleanups run last first).
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1440, 1000), chromedp.Flag("disable-gpu", true))...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	// A hang guard for every browser step.
	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		if _, err := chromedp.Run(sctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1440, 1000)); err != nil { // starts the browser: no timeout
		t.Fatalf("starting %s: %v", browser, err)
	}
	step("opening the console", chromedp.Navigate(f.RouterURLs[0]+"/console"))
	untilPage(t, bctx, "the backends to show", fmt.Sprintf(`document.querySelectorAll(".card[data-backend]").length === %d`, len(cfg.Backends)), time.Now().Add(30*time.Second))
	time.Sleep(warmup)

	// Drain one backend with a signed operator call.
	req, err := auth.NewSigner(f.Key, "operator").NewRequest("router/router-0", http.MethodPost, f.RouterURLs[0]+"/admin/backends/"+drained+"/drain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("drain %s: %d", drained, resp.StatusCode)
	}
	start := time.Now()
	showsDrain := fmt.Sprintf(`(() => { const c = document.querySelector('.card[data-backend=%q]');
		return !!c && (c.dataset.state === "draining" || c.dataset.state === "terminated") && c.dataset.eligible === "false"
			&& c.textContent.includes("drained")
			&& !!document.querySelector('#events li[data-kind="drain"][data-backend=%q]'); })()`, drained, drained)
	waitDOM(t, bctx, "the drained state", showsDrain, start)

	// Kill another backend's engine while it streams (the load keeps streams
	// in flight at every backend): its gateway quarantines the workers whose
	// requests ended uncertainly.
	if err := f.KillEngine(killed); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the gateway to quarantine a worker", func() bool { return len(f.Gateways[killed].Quarantined()) > 0 })
	start = time.Now()
	showsQuarantine := fmt.Sprintf(`(() => { const c = document.querySelector('.card[data-backend=%q]');
		return !!c && c.dataset.quarantined !== "0"
			&& !!document.querySelector('#events li[data-kind="quarantine"][data-backend=%q]'); })()`, killedName, killedName)
	waitDOM(t, bctx, "the quarantine", showsQuarantine, start)

	time.Sleep(time.Second) // one more update, for the picture
	var png []byte
	step("the screenshot", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		var err error
		png, err = chromedp.FullScreenshot(100)(ctx, tg)
		return err
	}))
	path := filepath.Join(dir, "console.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if still := f.Routers[0].Backends(); len(still) != len(cfg.Backends) {
		t.Errorf("the router lists %d backends, want %d", len(still), len(cfg.Backends))
	}
}

// waitDOM polls the page until expr is true: it must be within
// consoleShows of start; a much longer wait only guards against a hang.
func waitDOM(t *testing.T, bctx context.Context, what, expr string, start time.Time) {
	t.Helper()
	untilPage(t, bctx, what, expr, start.Add(30*time.Second)) // the hang guard
	took := time.Since(start)
	t.Logf("the page showed %s after %v", what, took.Round(time.Millisecond))
	if took > consoleShows {
		t.Errorf("the page showed %s after %v, want within %v", what, took.Round(time.Millisecond), consoleShows)
	}
}

// untilPage polls the page until expr is true, failing with the page's
// text after deadline.
func untilPage(t *testing.T, bctx context.Context, what, expr string, deadline time.Time) {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err != nil {
			t.Fatalf("reading the page for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			ctx, cancel := context.WithTimeout(bctx, 10*time.Second)
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			cancel()
			t.Fatalf("the page did not show %s in time; it reads:\n%s", what, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sendLoad sends streamed completions to a router until ctx ends, so that
// every backend has streams in flight.
func sendLoad(ctx context.Context, url string, worker int) {
	for i := 0; ctx.Err() == nil; i++ {
		body := fmt.Sprintf(`{"stream":true,"max_tokens":400,"messages":[{"role":"user","content":"load %d from worker %d"}]}`, i, worker)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("X-Session-ID", fmt.Sprintf("w%d-s%d", worker, i%7))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(40 * time.Millisecond):
		}
	}
}
