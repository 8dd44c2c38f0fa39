package engine

import (
	"math"
	"strings"
	"testing"
	"time"
)

// hostProfile is a small half-scale worker with a host tier: 3,000 GPU KV
// tokens, hostTokens on the host, loading 100,000 tokens a second (10 us a
// token).
func hostProfile(hostTokens int) Profile {
	p := HalfProfile()
	p.KVTokens, p.MaxSeqs = 3000, 4
	p.HostKVTokens, p.HostKVLoadTokensPerS = hostTokens, 100_000
	return p
}

// blocksHostProfile is the worker replayBlocks streams run on: 12,000 GPU
// KV tokens, 8 sequences, and a host tier of 8,000 tokens loading 200,000
// a second, so that blocks are evicted to the host and hit there.
func blocksHostProfile() Profile {
	p := HalfProfile()
	p.KVTokens, p.MaxSeqs = 12_000, 8
	p.HostKVTokens, p.HostKVLoadTokensPerS = 8000, 200_000
	return p
}

// TestHostTierKeepsEvictedBlocks: a block the GPU cache evicts moves to
// the host tier, a match continues into it, and a hit there is loaded (its
// transfer added to the admitting step) instead of recomputed, counted as
// a host hit. Without the tier the same requests recompute it.
func TestHostTierKeepsEvictedBlocks(t *testing.T) {
	tests := []struct {
		name       string
		host       int
		prefix     int // CachedPrefix of chain 1 after chain 2 ran
		cached     int // the third request's cached tokens
		fromHost   int // of which from the host
		firstToken time.Duration
	}{
		// 8 ms + 0.1 ms x 100 prefill tokens + 10 us x 512 loaded tokens.
		{"host tier", 4000, 1536, 1536, 512, 18*ms + 5120*time.Microsecond},
		// 8 ms + 0.1 ms x 612 prefill tokens.
		{"no host tier", 0, 1024, 1024, 0, 8*ms + 61200*time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := hostProfile(tt.host)
			if tt.host == 0 {
				p.HostKVLoadTokensPerS = 0
			}
			w := newWorker(t, p, Options{})
			must(t, w.Submit(0, blockReq(1, 512, 1, 1, 2, 3)))
			drain(t, w)
			// Chain 2 needs 1,537 tokens: 1,536 + 1,537 > 3,000 evicts
			// chain 1's tail block.
			must(t, w.Submit(time.Second, blockReq(2, 512, 1, 4, 5, 6)))
			drain(t, w)
			r1 := blockReq(0, 512, 1, 1, 2, 3)
			if got := w.CachedPrefix(&r1); got != tt.prefix {
				t.Fatalf("chain 1 cached prefix %d, want %d", got, tt.prefix)
			}
			if got, want := w.HostTokens(), min(tt.host, 512); got != want {
				t.Fatalf("host tier holds %d tokens, want %d", got, want)
			}
			must(t, w.Submit(2*time.Second, blockReq(3, 100, 1, 1, 2, 3, 7)))
			ev := drain(t, w)
			if ev[0].At-2*time.Second != tt.firstToken {
				t.Errorf("first token after %v, want %v", ev[0].At-2*time.Second, tt.firstToken)
			}
			if ev[1].CachedTokens != tt.cached || ev[1].HostTokens != tt.fromHost {
				t.Errorf("cached %d (host %d), want %d (host %d)", ev[1].CachedTokens, ev[1].HostTokens, tt.cached, tt.fromHost)
			}
			tot := w.Totals()
			if tot.HostTokens != int64(tt.fromHost) || (tot.HostHits == 1) != (tt.fromHost > 0) {
				t.Errorf("totals: %d host hits, %d host tokens; want %d tokens", tot.HostHits, tot.HostTokens, tt.fromHost)
			}
			if tt.host > 0 {
				// The loaded block is back in GPU memory; the third request
				// pushed chain 2's tail to the host in its place.
				r2 := blockReq(0, 512, 1, 4, 5, 6)
				if w.HostTokens() != 512 || w.CachedPrefix(&r1) != 1536 || w.CachedPrefix(&r2) != 1536 {
					t.Errorf("after the hit: host %d tokens, chains cached %d and %d; want 512, 1536, 1536",
						w.HostTokens(), w.CachedPrefix(&r1), w.CachedPrefix(&r2))
				}
				if w.KVUsed()+w.CacheTokens() > p.KVTokens {
					t.Errorf("GPU holds %d + %d tokens, over its %d", w.KVUsed(), w.CacheTokens(), p.KVTokens)
				}
			}
		})
	}
}

// TestHostTierSessions: a finished session's entry evicted from the GPU
// goes to the host tier, and the session's next turn loads it from there.
func TestHostTierSessions(t *testing.T) {
	w := newWorker(t, hostProfile(4000), Options{})
	must(t, w.Submit(0, Request{ID: 1, Session: 7, PromptTokens: 1000, OutputTokens: 10}))
	drain(t, w)
	// Another session's 2,500-token prompt pushes session 7 (1,010 tokens) out.
	must(t, w.Submit(time.Second, Request{ID: 2, Session: 8, PromptTokens: 2500, OutputTokens: 1}))
	drain(t, w)
	if got := w.CachedTokens(7); got != 1010 || w.HostTokens() != 1010 {
		t.Fatalf("session 7: %d tokens cached, host tier %d; want 1010 on the host", got, w.HostTokens())
	}
	must(t, w.Submit(2*time.Second, Request{ID: 3, Session: 7, PromptTokens: 1100, OutputTokens: 1}))
	ev := drain(t, w)
	// 8 ms + 0.1 ms x 90 prefill tokens + 10 us x 1,010 loaded tokens.
	if want := 17*ms + 10100*time.Microsecond; ev[0].At-2*time.Second != want {
		t.Errorf("first token after %v, want %v", ev[0].At-2*time.Second, want)
	}
	if ev[1].CachedTokens != 1010 || ev[1].HostTokens != 1010 {
		t.Errorf("cached %d (host %d), want 1010 from the host", ev[1].CachedTokens, ev[1].HostTokens)
	}
	if w.CachedTokens(7) != 1101 {
		t.Errorf("session 7's new entry holds %d tokens, want 1101", w.CachedTokens(7))
	}
}

// TestHostTierBounded: the host tier never holds more than its size and
// drops its least recently used entries first; an entry larger than the
// whole tier is dropped.
func TestHostTierBounded(t *testing.T) {
	p := hostProfile(1100) // room for two 512-token blocks
	w := newWorker(t, p, Options{})
	for i := range uint64(6) {
		must(t, w.Submit(time.Duration(i)*time.Second, blockReq(i+1, 512, 1, 10*i+1, 10*i+2, 10*i+3)))
		drain(t, w)
		if w.HostTokens() > p.HostKVTokens {
			t.Fatalf("after request %d the host tier holds %d tokens, over its %d", i+1, w.HostTokens(), p.HostKVTokens)
		}
	}
	// The GPU holds the last chain and a bit: the host the two blocks
	// evicted last, chain 4's head blocks (evicted after its tail).
	cached := func(hashes ...uint64) int {
		r := blockReq(0, 512, 1, hashes...)
		return w.CachedPrefix(&r)
	}
	if w.HostTokens() != 1024 {
		t.Errorf("host tier holds %d tokens, want 1024", w.HostTokens())
	}
	if got := cached(1, 2, 3); got != 0 {
		t.Errorf("chain 1 still cached (%d tokens): the host tier should have dropped it first", got)
	}
	big := hostProfile(500)
	wb := newWorker(t, big, Options{})
	must(t, wb.Submit(0, blockReq(1, 512, 1, 1, 2, 3)))
	drain(t, wb)
	must(t, wb.Submit(time.Second, blockReq(2, 512, 1, 4, 5, 6)))
	drain(t, wb)
	if wb.HostTokens() != 0 {
		t.Errorf("a 500-token host tier holds %d tokens of 512-token blocks", wb.HostTokens())
	}
}

// TestHostTierRunsEqualSteps: with a host tier, runs of identical steps
// give exactly what stepping one at a time gives, and the same seed the
// same events; the tier serves hits and stays within its size.
func TestHostTierRunsEqualSteps(t *testing.T) {
	p := blocksHostProfile()
	hostHits := 0
	for seed := uint64(1); seed <= 30; seed++ {
		stepped, st := replayBlocks(t, p, Options{MaxStepsPerRun: 1}, seed)
		runs, rt := replayBlocks(t, p, Options{}, seed)
		again, _ := replayBlocks(t, p, Options{}, seed)
		if st.Steps != rt.Steps || st.BusyTime != rt.BusyTime || st.CachedTokens != rt.CachedTokens ||
			st.HostTokens != rt.HostTokens || st.HostHits != rt.HostHits || math.Abs(st.BatchSeconds-rt.BatchSeconds) > 1e-9 {
			t.Fatalf("seed %d: totals differ:\nsteps %+v\nruns  %+v", seed, st, rt)
		}
		if len(stepped) != len(runs) || len(runs) != len(again) {
			t.Fatalf("seed %d: %d events stepping, %d in runs, %d again", seed, len(stepped), len(runs), len(again))
		}
		for i := range stepped {
			if stepped[i] != runs[i] || runs[i] != again[i] {
				t.Fatalf("seed %d: event %d differs: stepping %+v, runs %+v, again %+v", seed, i, stepped[i], runs[i], again[i])
			}
		}
		if st.HostTokens > 0 {
			hostHits++
		}
		if st.HostTokens > st.CachedTokens {
			t.Fatalf("seed %d: %d host tokens of %d cached", seed, st.HostTokens, st.CachedTokens)
		}
	}
	if hostHits < 20 {
		t.Errorf("%d of 30 seeds hit the host tier; the workload no longer exercises it", hostHits)
	}
}

func TestHostProfileValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Profile)
		wantErr string // "" for valid
	}{
		{"off", func(*Profile) {}, ""},
		{"on", func(p *Profile) { p.HostKVTokens, p.HostKVLoadTokensPerS = 1000, 5000 }, ""},
		{"negative size", func(p *Profile) { p.HostKVTokens = -1 }, "host_kv_tokens must be >= 0"},
		{"no load rate", func(p *Profile) { p.HostKVTokens = 1000 }, "host_kv_load_tokens_per_s must be >= 1 with a host tier"},
		{"rate without tier", func(p *Profile) { p.HostKVLoadTokensPerS = 5000 }, "needs host_kv_tokens > 0"},
		{"negative rate", func(p *Profile) { p.HostKVTokens, p.HostKVLoadTokensPerS = 1000, -1 }, "finite number >= 0"},
		{"NaN rate", func(p *Profile) { p.HostKVTokens, p.HostKVLoadTokensPerS = 1000, math.NaN() }, "finite number >= 0"},
		{"infinite rate", func(p *Profile) { p.HostKVTokens, p.HostKVLoadTokensPerS = 1000, math.Inf(1) }, "finite number >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := FullProfile()
			tt.edit(&p)
			err := p.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("valid profile rejected: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
	for _, name := range ProfileNames() {
		p, err := ProfileByName(name)
		if err != nil || p.Validate() != nil || p.Name != name {
			t.Errorf("built-in profile %q: %v %v", name, err, p.Validate())
		}
		if p.HostTier() != strings.HasSuffix(name, "-host") {
			t.Errorf("built-in profile %q: host tier %v", name, p.HostTier())
		}
	}
	if d := FullHostProfile().HostLoadDuration(1_000_000); d < 2*time.Second || d > 3*time.Second {
		t.Errorf("full-host loads 1M tokens in %v, want about 2.6 s (64 GiB at 25 GB/s)", d)
	}
}
