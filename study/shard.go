package study

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stargate-llm/stargate/policy"
)

// MaxShards bounds --shard's N: more parts than that is a typo, not a plan.
const MaxShards = 10_000

// Shard is one part of a study's runs, for a sweep spread over machines (a
// Kubernetes Indexed Job): part Index of Count, counted from 0. Run i of the
// study belongs to part i mod Count, so every part gets a mix of fleets,
// rates and policies and the parts take about as long.
type Shard struct {
	Index, Count int
}

// ParseShard reads "I/N" with 0 <= I < N <= MaxShards.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(s, "/")
	i, errI := strconv.Atoi(strings.TrimSpace(is))
	n, errN := strconv.Atoi(strings.TrimSpace(ns))
	if !ok || errI != nil || errN != nil {
		return Shard{}, fmt.Errorf("--shard %q: want I/N, the part I (counted from 0) of N parts, e.g. 0/4", s)
	}
	if n < 1 || n > MaxShards {
		return Shard{}, fmt.Errorf("--shard %q: N must be 1-%d, got %d", s, MaxShards, n)
	}
	if i < 0 || i >= n {
		return Shard{}, fmt.Errorf("--shard %q: I must be 0-%d (parts are counted from 0), got %d", s, n-1, i)
	}
	return Shard{Index: i, Count: n}, nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Indices returns the study's run indices (of total) this part runs, in order.
func (s Shard) Indices(total int) []int {
	var out []int
	for i := s.Index; i < total; i += s.Count {
		out = append(out, i)
	}
	return out
}

// Part is what one shard of a study writes: its runs and enough about the
// whole study to check, when the parts are merged, that they belong together.
type Part struct {
	Study  string `json:"study"`
	Quick  bool   `json:"quick,omitempty"`
	Shard  int    `json:"shard"`
	Shards int    `json:"shards"`
	// Plan names every run of the whole study, in order (label and windows).
	Plan []string `json:"plan"`
	// Indices are this part's runs' positions in Plan.
	Indices []int       `json:"indices"`
	Runs    []RunResult `json:"runs"`
}

// PartFile is the name a part is written under in its directory.
func PartFile(s Shard) string { return fmt.Sprintf("part-%d-of-%d.json", s.Index, s.Count) }

// planOf names every spec of a study: the merge refuses parts run with
// different study options.
func planOf(specs []RunSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = fmt.Sprintf("%s %v+%v", s.Label(), s.Warmup, s.Measure)
	}
	return out
}

// RoutingShard runs one part of the routing study.
func RoutingShard(ctx context.Context, reg *policy.Registry, opts RoutingOptions, shard Shard) (*Part, error) {
	specs, err := RoutingSpecs(opts)
	if err != nil {
		return nil, err
	}
	idx := shard.Indices(len(specs))
	mine := make([]RunSpec, len(idx))
	for k, i := range idx {
		mine[k] = specs[i]
	}
	runs, err := RunAll(ctx, mine, reg, opts.Parallel, opts.Progress)
	if err != nil {
		return nil, err
	}
	if runs == nil {
		runs = []RunResult{}
	}
	return &Part{Study: "routing", Quick: opts.Quick, Shard: shard.Index, Shards: shard.Count,
		Plan: planOf(specs), Indices: idx, Runs: runs}, nil
}

// Write writes the part as dir/PartFile.
func (p *Part) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("study: creating output directory: %w", err)
	}
	return WriteFile(dir, PartFile(Shard{p.Shard, p.Shards}), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	})
}

// maxPartBytes bounds one part file.
const maxPartBytes = 1 << 30

// ReadParts reads every part-*-of-*.json in the given directories.
func ReadParts(dirs []string) ([]*Part, error) {
	var parts []*Part
	for _, dir := range dirs {
		st, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("merge: %s is not a directory; give the directories the shards wrote (--out)", dir)
		}
		files, err := filepath.Glob(filepath.Join(dir, "part-*-of-*.json"))
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("merge: %s holds no part-I-of-N.json; run stargate study NAME --shard I/N --out %s first", dir, dir)
		}
		for _, file := range files {
			p, err := readPart(file)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		}
	}
	return parts, nil
}

func readPart(file string) (*Part, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only
	data, err := io.ReadAll(io.LimitReader(f, maxPartBytes+1))
	if err != nil {
		return nil, fmt.Errorf("merge: reading %s: %w", file, err)
	}
	if len(data) > maxPartBytes {
		return nil, fmt.Errorf("merge: %s is larger than %d bytes", file, maxPartBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Part
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("merge: %s is not a study part: %w", file, err)
	}
	if len(p.Runs) != len(p.Indices) {
		return nil, fmt.Errorf("merge: %s has %d runs for %d indices; the file is damaged", file, len(p.Runs), len(p.Indices))
	}
	return &p, nil
}

// ErrMerge marks parts that do not make a whole study.
var ErrMerge = errors.New("cannot merge")

// MergeRouting joins the parts of a sharded routing study into the results
// the unsharded study gives: the same runs in the same order. Every part
// 0..N-1 must be there exactly once, from the same study with the same
// options.
func MergeRouting(parts []*Part) (*Results, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: no parts", ErrMerge)
	}
	first := parts[0]
	if first.Study != "routing" {
		return nil, fmt.Errorf("%w: study %q; only the routing study runs sharded so far", ErrMerge, first.Study)
	}
	if first.Shards < 1 || first.Shards > MaxShards {
		return nil, fmt.Errorf("%w: part %d/%d: N must be 1-%d", ErrMerge, first.Shard, first.Shards, MaxShards)
	}
	seen := make([]bool, first.Shards)
	runs := make([]RunResult, len(first.Plan))
	filled := make([]bool, len(first.Plan))
	for _, p := range parts {
		what := fmt.Sprintf("part %d/%d", p.Shard, p.Shards)
		switch {
		case p.Study != first.Study || p.Quick != first.Quick || p.Shards != first.Shards || !slices.Equal(p.Plan, first.Plan):
			return nil, fmt.Errorf("%w: %s comes from a different study run than part %d/%d (study, --quick, N or runs differ)",
				ErrMerge, what, first.Shard, first.Shards)
		case p.Shard < 0 || p.Shard >= p.Shards:
			return nil, fmt.Errorf("%w: %s is out of range", ErrMerge, what)
		case seen[p.Shard]:
			return nil, fmt.Errorf("%w: %s given twice", ErrMerge, what)
		case !slices.Equal(p.Indices, Shard{p.Shard, p.Shards}.Indices(len(p.Plan))):
			return nil, fmt.Errorf("%w: %s holds other runs than its share; the file is damaged", ErrMerge, what)
		}
		seen[p.Shard] = true
		for k, i := range p.Indices {
			runs[i], filled[i] = p.Runs[k], true
		}
	}
	var missing []string
	for i, ok := range seen {
		if !ok {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: parts %s of %d are missing", ErrMerge, strings.Join(missing, ", "), first.Shards)
	}
	for i, ok := range filled {
		if !ok { // cannot happen when every part holds its share
			return nil, fmt.Errorf("%w: run %s is in no part", ErrMerge, first.Plan[i])
		}
	}
	return &Results{Study: first.Study, Quick: first.Quick, Runs: runs}, nil
}
