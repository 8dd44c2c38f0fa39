package policy

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/cputime"
)

// seq returns blocks from..to-1.
func seq(from, to uint64) []uint64 {
	out := make([]uint64, 0, to-from)
	for h := from; h < to; h++ {
		out = append(out, h)
	}
	return out
}

func newPrefix(t testing.TB, bs []Backend, edit func(*PrefixParams)) *Prefix {
	t.Helper()
	p := DefaultParams()
	if edit != nil {
		edit(&p.Prefix)
	}
	pp, err := NewPrefix(p, bs)
	if err != nil {
		t.Fatal(err)
	}
	return pp
}

func TestPrefixChoice(t *testing.T) {
	const holder = 2
	tests := []struct {
		name string
		// load sets the views' state; held is the blocks the holder has.
		load  func(vs []View)
		held  []uint64
		req   []uint64
		slack float64
		want  string // "holder", "pulsar" (pulsar-waw's decision) or "wait-holder"
	}{
		{name: "longest prefix wins", held: seq(1, 11), req: seq(1, 13), slack: 0.25, want: "holder"},
		{name: "short match leaves it to pulsar-waw", held: seq(1, 3), req: seq(1, 13), slack: 0.25, want: "pulsar"},
		{name: "no blocks: pulsar-waw", held: seq(1, 11), req: nil, slack: 0.25, want: "pulsar"},
		{name: "overloaded holder falls back", held: seq(1, 11), req: seq(1, 13), slack: 0.25,
			load: func(vs []View) { vs[holder].Active = 40 }, want: "pulsar"},
		{name: "loaded within the slack keeps the prefix", held: seq(1, 11), req: seq(1, 13), slack: 0.7,
			load: func(vs []View) { vs[holder].Active = 40 }, want: "holder"},
		{name: "busy holder in a busy fleet: wait there", held: seq(1, 11), req: seq(1, 13), slack: 0.25,
			load: func(vs []View) {
				for i := range vs {
					vs[i].Active = 50
				}
			}, want: "wait-holder"},
		{name: "ineligible holder is skipped", held: seq(1, 11), req: seq(1, 13), slack: 0.25,
			load: func(vs []View) { vs[holder].Eligible = false }, want: "pulsar"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bs := backends(5)
			pp := newPrefix(t, bs, func(p *PrefixParams) { p.LoadSlack = tc.slack })
			vs := views(bs, 50)
			pp.record(0, &Request{Blocks: tc.held, BlockTokens: 16}, &vs[holder], pp.ids[holder])
			if tc.load != nil {
				tc.load(vs)
			}
			// A session whose pulsar-waw choice is not the holder.
			var r *Request
			for s := uint64(1); ; s++ {
				r = &Request{Session: s, QueuedAt: -1, Blocks: tc.req, BlockTokens: 16}
				if d := NewPulsarWaW(DefaultParams(), bs).Pick(time.Second, r, vs); d.Backend != holder {
					break
				}
			}
			r.Arrived = time.Second
			want := NewPulsarWaW(DefaultParams(), bs).Pick(time.Second, r, vs)
			switch tc.want {
			case "holder":
				want = dispatch(holder)
			case "wait-holder":
				want = Decision{Kind: Wait, Backend: holder, Until: time.Second + DefaultParams().BandStep}
			}
			if got := pp.Pick(time.Second, r, vs); got != want {
				t.Errorf("Pick = %+v, want %+v", got, want)
			}
		})
	}
}

// TestPrefixFollowsConversation: a conversation's turns, each prompt the
// previous one plus more, stay where the first landed, even when another
// backend ranks first for their session keys.
func TestPrefixFollowsConversation(t *testing.T) {
	bs := backends(8)
	pp := newPrefix(t, bs, nil)
	vs := views(bs, 50)
	first := -1
	for turn := range 6 {
		blocks := seq(100, 104+uint64(turn)*4)
		r := &Request{Session: uint64(turn + 1), QueuedAt: -1, Blocks: blocks, BlockTokens: 16}
		d := pp.Pick(time.Duration(turn)*time.Second, r, vs)
		if d.Kind != Dispatch {
			t.Fatalf("turn %d: %+v", turn, d)
		}
		if turn == 0 {
			first = d.Backend
		} else if d.Backend != first {
			t.Fatalf("turn %d went to %d, the conversation is at %d", turn, d.Backend, first)
		}
	}
}

// TestPrefixDeterministic: the same requests in the same order give the
// same decisions, and a popular prefix spreads once its holder runs hot.
func TestPrefixDeterministic(t *testing.T) {
	run := func() ([]int, []int) {
		bs := backends(6)
		pp := newPrefix(t, bs, nil)
		vs := views(bs, 10)
		rng := rand.New(rand.NewPCG(7, 7))
		system := seq(1, 20)
		var out []int
		perBackend := make([]int, len(vs))
		for i := range 400 {
			blocks := append(slices.Clone(system), uint64(1000+i))
			r := &Request{Session: rng.Uint64(), QueuedAt: -1, Arrived: time.Duration(i) * time.Millisecond, Blocks: blocks, BlockTokens: 16}
			d := pp.Pick(r.Arrived, r, vs)
			out = append(out, int(d.Kind)*100+d.Backend)
			if d.Kind == Dispatch {
				vs[d.Backend].Active++
				perBackend[d.Backend]++
			}
			if done := rng.IntN(len(vs)); vs[done].Active > 0 {
				vs[done].Active--
			}
		}
		return out, perBackend
	}
	a, per := run()
	b, _ := run()
	if !slices.Equal(a, b) {
		t.Fatal("same requests, different decisions")
	}
	busiest := slices.Max(per)
	total := 0
	for _, n := range per {
		total += n
	}
	if busiest == total {
		t.Errorf("every request of a shared system prompt went to one backend: %v", per)
	}
}

func TestPrefixMembership(t *testing.T) {
	bs := backends(3)
	pp := newPrefix(t, bs, nil)
	vs := views(bs, 50)
	pp.record(0, &Request{Blocks: seq(1, 9), BlockTokens: 16}, &vs[2], pp.ids[2])
	pp.record(0, &Request{Blocks: seq(50, 59), BlockTokens: 16}, &vs[0], pp.ids[0])
	// Backend 0 leaves; 1 and 2 move to positions 0 and 1.
	pp.SetBackends(bs[1:], []int{1, 2})
	vs = views(bs[1:], 50)
	if d := pp.Pick(time.Second, &Request{Session: 1, QueuedAt: -1, Blocks: seq(1, 10), BlockTokens: 16}, vs); d != dispatch(1) {
		t.Errorf("after a leave, the holder's prefix led to %+v, want backend at position 1", d)
	}
	if _, best := pp.idx.Match(seq(50, 59), time.Second, nil); best != 0 {
		t.Errorf("the leaver's blocks are still indexed (%d)", best)
	}
}

func TestPrefixParamsValidate(t *testing.T) {
	for _, edit := range []func(*PrefixParams){
		func(p *PrefixParams) { p.TokensPerSlot = -1 },
		func(p *PrefixParams) { p.LoadSlack = -0.1 },
		func(p *PrefixParams) { p.MinShare = 1.5 },
		func(p *PrefixParams) { p.MaxAge = -time.Second },
		func(p *PrefixParams) { p.MaxBlocks = -1 },
	} {
		p := DefaultParams()
		edit(&p.Prefix)
		if _, err := NewRegistry().New(PrefixName, p, backends(2), nil); err == nil {
			t.Errorf("params %+v accepted", p.Prefix)
		}
	}
}

// BenchmarkPrefixPick is a pick with a 24-block prompt whose first 16 blocks
// one backend holds, over backends whose indexes are full (each holds
// 40,000 tokens per slot x 50 slots in 512-token blocks).
func BenchmarkPrefixPick(b *testing.B) {
	for _, c := range []struct {
		n    int
		flat bool
	}{{20, false}, {1000, false}, {1000, true}} {
		n := c.n
		name := fmt.Sprintf("backends=%d", n)
		if c.flat {
			name += "/flat" // the ranking before the rank tree
		}
		b.Run(name, func(b *testing.B) {
			bs := backends(n)
			pp := newPrefix(b, bs, nil)
			pp.pw.flat = c.flat
			vs := views(bs, 50)
			for i := range vs {
				vs[i].Active = i % 40
			}
			next := uint64(1 << 32)
			for i := range vs { // fill every index with 24-block prompts behind a shared block
				for range 40000*50/512/23 + 1 {
					blocks := append([]uint64{0}, seq(next, next+23)...)
					next += 23
					pp.record(0, &Request{Blocks: blocks, BlockTokens: 512}, &vs[i], pp.ids[i])
				}
			}
			held := append([]uint64{0}, seq(7, 22)...)
			pp.record(0, &Request{Blocks: held, BlockTokens: 512}, &vs[n/2], pp.ids[n/2])
			blocks := append(slices.Clone(held), seq(1<<40, 1<<40+8)...)
			r := &Request{QueuedAt: -1, Blocks: blocks, BlockTokens: 512}
			pp.Track(vs)
			b.ReportAllocs()
			cpu := cputime.Used()
			for i := 0; b.Loop(); i++ {
				r.Session = uint64(i)
				if d := pp.Pick(time.Second, r, vs); d.Backend != n/2 {
					b.Fatalf("picked %+v, want the holder %d", d, n/2)
				}
			}
			b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestPrefixIndexSizing: a backend's index holds its cache capacity in
// blocks when its view gives one (GPU KV and host tier), capacity x 40,000
// tokens when it does not, and capacity x tokens_per_slot whenever that
// is set.
func TestPrefixIndexSizing(t *testing.T) {
	tests := []struct {
		name        string
		perSlot     int
		cacheTokens int
		want        int // blocks of 512 tokens
	}{
		{"from the view's cache capacity", 0, 6_000_000, 6_000_000 / 512},
		{"unknown capacity: the default per slot", 0, 0, 50 * DefaultTokensPerSlot / 512},
		{"tokens_per_slot overrides the view", 1000, 6_000_000, 50 * 1000 / 512},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := backends(2)
			pp := newPrefix(t, bs, func(p *PrefixParams) { p.TokensPerSlot = tt.perSlot })
			vs := views(bs, 50)
			vs[1].CacheTokens = tt.cacheTokens
			pp.record(0, &Request{Blocks: seq(1, 9), BlockTokens: 512}, &vs[1], pp.ids[1])
			if got := pp.idx.Capacity(pp.ids[1]); got != tt.want {
				t.Errorf("index capacity %d blocks, want %d", got, tt.want)
			}
		})
	}
}

// TestPrefixBestMatchesSort: the prefix pick over the rank tree keeps only
// the band's worth of holders and the best free one (prefixBest); over
// random holders, with ties in blocks held and in time, they are the
// first k of the holders all sorted and the first free one among them,
// whatever the order they come in.
func TestPrefixBestMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 5))
	for trial := range 2000 {
		n := rng.IntN(60)
		k := rng.IntN(n+4) - 1 // -1 and 0 keep one
		all := make([]prefixCand, n)
		free := make(map[int]bool)
		for i := range all {
			all[i] = prefixCand{pos: i, m: int32(1 + rng.IntN(1+trial%5)), t: float64(rng.IntN(1 + trial%40))}
			free[i] = rng.IntN(1+trial%7) == 0
		}
		rng.Shuffle(n, func(i, j int) { all[i], all[j] = all[j], all[i] })
		var sel prefixBest
		sel.reset(k, nil)
		for _, c := range all {
			if sel.see(c.m, free[c.pos]) {
				sel.offer(c, free[c.pos])
			}
		}
		got := sel.sorted()
		want := slices.Clone(all)
		slices.SortFunc(want, func(a, b prefixCand) int {
			if a.m != b.m {
				return cmp.Compare(b.m, a.m)
			}
			if c := cmp.Compare(a.t, b.t); c != 0 {
				return c
			}
			return cmp.Compare(a.pos, b.pos)
		})
		wantFree := -1
		for _, c := range want {
			if free[c.pos] {
				wantFree = c.pos
				break
			}
		}
		want = want[:min(max(k, 1), n)]
		if !slices.Equal(got, want) || sel.free.pos != wantFree || sel.n != n {
			t.Fatalf("trial %d (%d holders, k %d): kept %v, free %d, seen %d; sorted %v, free %d", trial, n, k, got, sel.free.pos, sel.n, want, wantFree)
		}
	}
}

// BenchmarkPrefixSharedPick is a prefix pick over the rank tree when every
// backend holds the prompt's prefix (a shared system prompt), all full
// but one: every backend is a holder, and the pick keeps the band's worth.
func BenchmarkPrefixSharedPick(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("backends=%d", n), func(b *testing.B) {
			bs := backends(n)
			pp := newPrefix(b, bs, nil)
			vs := views(bs, 50)
			held := seq(7, 23)
			for i := range vs {
				vs[i].Active = 50
				pp.record(0, &Request{Blocks: held, BlockTokens: 512}, &vs[i], pp.ids[i])
			}
			vs[n/3].Active = 0
			blocks := append(slices.Clone(held), seq(1<<40, 1<<40+8)...)
			r := &Request{QueuedAt: -1, Blocks: blocks, BlockTokens: 512}
			pp.Track(vs)
			b.ReportAllocs()
			cpu := cputime.Used()
			for i := 0; b.Loop(); i++ {
				r.Session = uint64(i)
				pp.Pick(time.Second, r, vs)
			}
			b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
