package workload

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestClassesMatchTheirDocs draws 200 s of every class and checks the
// arrival rate, the means the class declares and the order of arrivals.
func TestClassesMatchTheirDocs(t *testing.T) {
	// The Solyx AI Grid paper's tier-2 SLOs (Table 2), in its class order.
	tier2 := map[string]time.Duration{"baseline_mixed": 1500, "rapid_shift": 1500, "code_heavy": 3000,
		"adversarial_spike": 3000, "multiturn": 3500, "rag_multidoc": 3000, "long_context": 3000, "very_long": 7000}
	if got := strings.Join(ClassNames(), ","); got != "baseline_mixed,rapid_shift,code_heavy,adversarial_spike,multiturn,rag_multidoc,long_context,very_long" {
		t.Fatalf("classes %s", got)
	}
	for _, c := range Classes() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Tiers[1] != tier2[c.Name]*time.Millisecond || c.Tiers[0] >= c.Tiers[1] || c.Tiers[1] >= c.Tiers[2] {
				t.Errorf("tiers %v", c.Tiers)
			}
			if c.Doc == "" || !(c.DefaultRate > 0) {
				t.Errorf("doc %q, default rate %v", c.Doc, c.DefaultRate)
			}
			const rate, horizon = 40.0, 200 * time.Second
			s, err := c.Stream(rate, 3)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			var prompt, output float64
			// New prompt tokens and requests of each session seen from its
			// first turn.
			newTokens, requests := map[uint64]int{}, map[uint64]int{}
			prev := -c.Lead
			last := map[uint64]Request{}
			for i := 0; ; i++ {
				r := s.Next()
				if r.At < prev || (i == 0 && r.At != -c.Lead) {
					t.Fatalf("request %d at %v after one at %v (lead %v)", i, r.At, prev, c.Lead)
				}
				if r.At >= horizon {
					break
				}
				prev = r.At
				if r.Session == 0 || r.PromptTokens < 1 || r.OutputTokens < 1 || r.Follows != c.Sessions {
					t.Fatalf("bad request %+v", r)
				}
				if r.At >= 0 { // the lead ramps up; the rate holds from zero
					n++
					prompt += float64(r.PromptTokens)
					output += float64(r.OutputTokens)
				}
				if p, ok := last[r.Session]; ok {
					if r.Index != p.Index+1 {
						t.Fatalf("session %d: turn %d after turn %d", r.Session, r.Index, p.Index)
					}
					if !r.Fresh {
						// The prompt extends the previous prompt and answer.
						if r.PromptTokens <= p.PromptTokens+p.OutputTokens {
							t.Fatalf("session %d: prompt %d does not extend %d+%d", r.Session, r.PromptTokens, p.PromptTokens, p.OutputTokens)
						}
						newTokens[r.Session] -= p.PromptTokens + p.OutputTokens
					}
				} else if r.Index == 0 {
					requests[r.Session] = 0
				} else {
					t.Fatalf("session %d starts with turn %d at %v", r.Session, r.Index, r.At)
				}
				if !c.Sessions && r.Index != 0 {
					t.Fatalf("single-request class sent turn %d", r.Index)
				}
				if _, ok := requests[r.Session]; ok {
					requests[r.Session]++
					newTokens[r.Session] += r.PromptTokens
				}
				last[r.Session] = r
			}
			want := (rate + c.BurstRate) * horizon.Seconds()
			if math.Abs(float64(n)-want) > 0.01*want+51 {
				t.Errorf("%d requests in %v, want about %.0f", n, horizon, want)
			}
			near := func(what string, got, want float64) {
				if math.Abs(got-want) > 0.02*want {
					t.Errorf("mean %s %.1f, class says %.1f", what, got, want)
				}
			}
			near("prompt", prompt/float64(n), c.MeanPromptTokens)
			near("output", output/float64(n), c.MeanOutputTokens)
			var whole, wholeNew float64 // over the sessions seen whole
			for id, k := range requests {
				if last[id].Index == 7 || !c.Sessions {
					whole += float64(k)
					wholeNew += float64(newTokens[id])
				}
			}
			near("new prompt", wholeNew/whole, c.MeanNewPromptTokens)
		})
	}
}

func TestClassStreamIsSeeded(t *testing.T) {
	for _, c := range Classes() {
		draw := func(seed uint64) []Request {
			s, err := c.Stream(25, seed)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]Request, 500)
			for i := range out {
				out[i] = s.Next()
			}
			return out
		}
		a, b, other := draw(1), draw(1), draw(2)
		same := true
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s: same seed, request %d differs: %+v vs %+v", c.Name, i, a[i], b[i])
			}
			same = same && a[i] == other[i]
		}
		// Classes with a spread in their prompts draw them from the seed; the
		// session classes' shapes are fixed by the turn.
		if same != c.Sessions {
			t.Errorf("%s: another seed gives the same stream: %v", c.Name, same)
		}
	}
}

func TestSpikeBursts(t *testing.T) {
	c, err := ClassByName("adversarial_spike")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Stream(10, 1)
	at := map[time.Duration]int{}
	for r := s.Next(); r.At < 75*time.Second; r = s.Next() {
		at[r.At]++
	}
	for _, burst := range []time.Duration{10 * time.Second, 40 * time.Second, 70 * time.Second} {
		// 50 burst requests plus the steady request due at the same instant.
		if at[burst] != 51 {
			t.Errorf("%d requests at %v, want 51", at[burst], burst)
		}
	}
	if at[25*time.Second] != 1 || at[25*time.Second+50*time.Millisecond] != 0 {
		t.Errorf("steady stream: %d at 25 s, %d at 25.05 s; want 1 and 0 at 10 req/s", at[25*time.Second], at[25*time.Second+50*time.Millisecond])
	}
}

func TestMultiturnSessions(t *testing.T) {
	c, _ := ClassByName("multiturn")
	s, _ := c.Stream(8, 1) // one session a second
	first := map[uint64]Request{}
	for r := s.Next(); r.At < 120*time.Second; r = s.Next() {
		f, ok := first[r.Session]
		if !ok {
			first[r.Session] = r
			continue
		}
		if r.At-f.At != time.Duration(r.Index-f.Index)*10*time.Second || r.PromptTokens != 2048*(r.Index+1) {
			t.Fatalf("session %d: turn %d at %v, %d tokens; its turn %d was at %v", r.Session, r.Index, r.At, r.PromptTokens, f.Index, f.At)
		}
	}
	// The lead ramps the conversations up: by time zero every turn index is
	// under way, and one session a second sends one turn of each index
	// every 10 s.
	var atZero []int
	s, _ = c.Stream(8, 1)
	r := s.Next()
	if r.At != -70*time.Second || c.Lead != 70*time.Second {
		t.Errorf("first request at %v, lead %v; want -70s and 70s", r.At, c.Lead)
	}
	for ; r.At <= 0; r = s.Next() {
		if r.At == 0 {
			atZero = append(atZero, r.Index)
		}
	}
	if len(atZero) != 8 {
		t.Errorf("turns at time zero: %v, want one of each of the 8", atZero)
	}
}

func TestClassErrors(t *testing.T) {
	if _, err := ClassByName("chat"); err == nil || !strings.Contains(err.Error(), "baseline_mixed") {
		t.Errorf("unknown class: %v", err)
	}
	c, _ := ClassByName("very_long")
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1), 1e9} {
		if _, err := c.Stream(rate, 1); err == nil {
			t.Errorf("rate %v accepted", rate)
		}
	}
	var zero Class
	if _, err := zero.Stream(1, 1); err == nil {
		t.Error("a class without a generator made a stream")
	}
}
