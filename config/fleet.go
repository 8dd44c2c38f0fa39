package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/workload"
)

// MaxFileBytes bounds a fleet file.
const MaxFileBytes = 4 << 20

// Fleet is a decoded fleet file.
type Fleet struct {
	Name          string                    `yaml:"name"`
	Engine        string                    `yaml:"engine"`
	Profiles      map[string]engine.Profile `yaml:"profiles"`
	ClientLatency time.Duration             `yaml:"client_latency"`
	Regions       []RegionSpec              `yaml:"regions"`
	Gateway       gateway.Config            `yaml:"gateway"`
	Policy        policy.Params             `yaml:"policy"`
	Workload      workload.Config           `yaml:"workload"`
	Client        client.Config             `yaml:"client"`

	// Router is every router's liveness and capability tracking: its
	// heartbeat_ttl fails a backend not heard from for that long (zero, the
	// default: liveness off, as the routing study runs). The gateways'
	// heartbeat interval is gateway.heartbeat_interval.
	Router router.Config `yaml:"router"`

	// Pools split the backends into pools the live router picks by length
	// and model before placement (pools.go).
	Pools []PoolFileSpec `yaml:"pools"`

	// Pressure is the pressure policy's scoring (see PressureSpec); Parse
	// moves it into Policy.Pressure.
	Pressure *PressureSpec `yaml:"pressure"`
}

// RegionSpec is one region of a fleet file.
type RegionSpec struct {
	Name     string             `yaml:"name"`
	Routers  int                `yaml:"routers"`
	RTTms    map[string]float64 `yaml:"rtt_ms"`
	Backends []BackendFileSpec  `yaml:"backends"`
}

// BackendFileSpec is one backend of a fleet file, or a group of Count
// identical backends whose Name holds the pattern {i} (see ExpandGroups).
type BackendFileSpec struct {
	Name    string `yaml:"name"`
	GPUs    int    `yaml:"gpus"`
	Profile string `yaml:"profile"`
	// Count, when set, makes this entry a group of Count backends.
	Count int `yaml:"count,omitempty"`
	// Models are the models the backend serves, as its /v1/models would
	// list them (none: every model); the simulator places each session by
	// its model (sim.BackendSpec.Models).
	Models []string `yaml:"models"`
}

// defaultFleet holds every default a file may leave out.
func defaultFleet() Fleet {
	return Fleet{Engine: "half", ClientLatency: time.Millisecond, Gateway: gateway.DefaultConfig(),
		Policy: policy.DefaultParams(), Workload: workload.DefaultConfig(), Client: client.DefaultConfig(),
		Pressure: defaultPressureSpec()}
}

// Parse decodes a fleet file strictly. name is used in error messages.
func Parse(name string, data []byte) (*Fleet, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("fleet file %s: %d bytes is larger than the %d-byte limit", name, len(data), MaxFileBytes)
	}
	f := defaultFleet()
	dec := yaml.NewDecoder(bytes.NewReader(data), yaml.DisallowUnknownField())
	if err := decode(dec, &f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("fleet file %s is empty: it needs at least a regions list", name)
		}
		return nil, fmt.Errorf("fleet file %s:\n%s", name, yaml.FormatError(err, false, true))
	}
	// A second document would otherwise be ignored without a word.
	var more any
	if err := decode(dec, &more); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, fmt.Errorf("fleet file %s:\n%s", name, yaml.FormatError(err, false, true))
		}
		return nil, fmt.Errorf("fleet file %s holds more than one YAML document (---); a fleet file is one document", name)
	}
	if f.Name == "" {
		f.Name = strings.TrimSuffix(strings.TrimSuffix(baseName(name), ".yaml"), ".yml")
	}
	if err := f.ExpandGroups(); err != nil {
		return nil, fmt.Errorf("fleet file %s: %w", name, err)
	}
	if err := f.checkPools(); err != nil {
		return nil, fmt.Errorf("fleet file %s: %w", name, err)
	}
	if err := f.resolvePressure(); err != nil {
		return nil, fmt.Errorf("fleet file %s: %w", name, err)
	}
	return &f, nil
}

// decode is dec.Decode, but turns a panic in the decoder into an error:
// goccy/go-yaml v1.19.2 panics on some malformed input, e.g. a tag where a
// list is expected ("regions: !!seq", goccy/go-yaml#735, fixed upstream by
// #862). The decoder is local to Parse, so nothing is left half-updated that
// anyone else could see.
func decode(dec *yaml.Decoder, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the YAML decoder failed on this input (%v); look for a tag (!...) or other unusual syntax", r)
		}
	}()
	return dec.Decode(v)
}

// DecodeStrict decodes one YAML document into v as the fleet files are
// decoded: unknown keys are errors with their line, and so is a second
// document. what names the input in messages.
func DecodeStrict(what string, data []byte, v any) error {
	if len(data) > MaxFileBytes {
		return fmt.Errorf("%s: %d bytes is larger than the %d-byte limit", what, len(data), MaxFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data), yaml.DisallowUnknownField())
	if err := decode(dec, v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s is empty", what)
		}
		return fmt.Errorf("%s:\n%s", what, yaml.FormatError(err, false, true))
	}
	var more any
	if err := decode(dec, &more); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s holds more than one YAML document (---)", what)
	}
	return nil
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// Load reads a built-in fleet (see PresetNames) or a fleet file.
func Load(nameOrPath string) (*Fleet, error) {
	if f, ok := Preset(nameOrPath); ok {
		return f, nil
	}
	data, err := readLimited(nameOrPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("fleet %q is neither a built-in fleet (%s) nor a file", nameOrPath, strings.Join(PresetNames(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("reading fleet file: %w", err)
	}
	return Parse(nameOrPath, data)
}

// readLimited reads at most one byte past MaxFileBytes, so that an oversized
// file is reported without reading all of it (or forever, from a device).
func readLimited(path string) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = file.Close() }() // read-only: nothing to lose on close
	return io.ReadAll(io.LimitReader(file, MaxFileBytes+1))
}

// Run holds a simulation's run parameters.
type Run struct {
	Policy  string
	RPS     float64
	Seed    uint64
	Warmup  time.Duration
	Measure time.Duration
	// Engine, if set, replaces the fleet's default engine profile.
	Engine string
	// Class, if set, names a workload class (see package workload) whose
	// open loop replaces the fleet's sessions, at RPS.
	Class string
	// Cooldown runs on past the measured window (see sim.Config).
	Cooldown time.Duration
	// Clients, if > 0, runs a closed loop of that many clients instead of
	// sessions arriving at RPS (see sim.Config.Clients).
	Clients int
}

// SimConfig builds the simulator's configuration and validates it.
func (f *Fleet) SimConfig(run Run, reg *policy.Registry) (sim.Config, error) {
	engineName := f.Engine
	if run.Engine != "" {
		engineName = run.Engine
	}
	var errs []error
	profile := func(what, name string) engine.Profile {
		if p, ok := f.Profiles[name]; ok {
			if p.Name == "" {
				p.Name = name
			}
			return p
		}
		p, err := engine.ProfileByName(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w; profiles in this file: %v", what, err, mapKeys(f.Profiles)))
		}
		return p
	}
	def := profile("default profile", engineName)
	cfg := sim.Config{ClientLatency: f.ClientLatency, Gateway: f.Gateway, Policy: run.Policy, Params: f.Policy,
		Workload: f.Workload, Client: f.Client, RPS: run.RPS, Seed: run.Seed, Warmup: run.Warmup, Measure: run.Measure,
		Cooldown: run.Cooldown, Clients: run.Clients, Router: f.Router}
	if run.Class != "" {
		c, err := workload.ClassByName(run.Class)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Class = c
	}
	index := make(map[string]int, len(f.Regions))
	for i, r := range f.Regions {
		if r.Name == "" {
			errs = append(errs, fmt.Errorf("region %d has no name", i+1))
		}
		if _, dup := index[r.Name]; dup {
			errs = append(errs, fmt.Errorf("region %q listed twice", r.Name))
		}
		index[r.Name] = i
		cfg.Regions = append(cfg.Regions, sim.Region{Name: r.Name, Routers: r.Routers})
	}
	cfg.Latency = make([][]time.Duration, len(f.Regions))
	for i, r := range f.Regions {
		cfg.Latency[i] = make([]time.Duration, len(f.Regions))
		for to, rtt := range r.RTTms {
			j, ok := index[to]
			if !ok {
				errs = append(errs, fmt.Errorf("region %q: rtt_ms names unknown region %q", r.Name, to))
				continue
			}
			// !(rtt >= 0) also catches NaN; converting NaN or an out-of-range
			// float to a Duration is implementation-defined.
			oneWay := rtt / 2 * float64(time.Millisecond)
			if !(rtt >= 0) || oneWay >= math.MaxInt64 {
				errs = append(errs, fmt.Errorf("region %q: rtt_ms to %q must be a number of milliseconds >= 0 that fits a duration, got %v", r.Name, to, rtt))
				continue
			}
			cfg.Latency[i][j] = time.Duration(oneWay)
		}
		for _, other := range f.Regions[i+1:] { // each pair once
			if _, ok := r.RTTms[other.Name]; !ok && other.Name != r.Name {
				if _, back := other.RTTms[r.Name]; !back {
					errs = append(errs, fmt.Errorf("region %q: no rtt_ms to %q (give it in either region)", r.Name, other.Name))
				}
			}
		}
		for k, b := range r.Backends {
			if b.Name == "" {
				errs = append(errs, fmt.Errorf("region %q: backend %d has no name", r.Name, k+1))
			}
			if err := checkModels(b); err != nil {
				errs = append(errs, fmt.Errorf("region %q: %w", r.Name, err))
			}
			p := def
			if b.Profile != "" {
				p = profile(fmt.Sprintf("backend %q", b.Name), b.Profile)
			}
			cfg.Backends = append(cfg.Backends, sim.BackendSpec{Name: b.Name, Region: i, Workers: b.GPUs, Profile: p, Models: b.Models})
		}
	}
	// A round trip given in one direction only holds both ways.
	for i := range f.Regions {
		for j := range f.Regions {
			if _, ok := f.Regions[i].RTTms[f.Regions[j].Name]; !ok {
				cfg.Latency[i][j] = cfg.Latency[j][i]
			}
		}
	}
	if len(errs) > 0 {
		return sim.Config{}, fmt.Errorf("fleet %s: %w", f.Name, errors.Join(errs...))
	}
	if err := cfg.Validate(reg); err != nil {
		return sim.Config{}, fmt.Errorf("fleet %s: %w", f.Name, err)
	}
	return cfg, nil
}

func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// LoadProfile reads a built-in engine profile (engine.ProfileNames) or a YAML file
// holding one profile's fields (base_ms, per_decode_seq_ms, ...), strictly.
func LoadProfile(nameOrPath string) (engine.Profile, error) {
	if p, err := engine.ProfileByName(nameOrPath); err == nil {
		return p, nil
	}
	data, err := readLimited(nameOrPath)
	if errors.Is(err, os.ErrNotExist) {
		return engine.Profile{}, fmt.Errorf("profile %q is neither a built-in profile (%s) nor a file", nameOrPath, strings.Join(engine.ProfileNames(), ", "))
	}
	if err != nil {
		return engine.Profile{}, fmt.Errorf("reading profile file: %w", err)
	}
	if len(data) > MaxFileBytes {
		return engine.Profile{}, fmt.Errorf("profile file %s is larger than the %d-byte limit", nameOrPath, MaxFileBytes)
	}
	p := engine.HalfProfile()
	p.Name = strings.TrimSuffix(strings.TrimSuffix(baseName(nameOrPath), ".yaml"), ".yml")
	if err := decode(yaml.NewDecoder(bytes.NewReader(data), yaml.DisallowUnknownField()), &p); err != nil {
		if errors.Is(err, io.EOF) {
			return engine.Profile{}, fmt.Errorf("profile file %s is empty", nameOrPath)
		}
		return engine.Profile{}, fmt.Errorf("profile file %s:\n%s", nameOrPath, yaml.FormatError(err, false, true))
	}
	if err := p.Validate(); err != nil {
		return engine.Profile{}, fmt.Errorf("profile file %s: %w", nameOrPath, err)
	}
	return p, nil
}

// Bounds of a backend's models: what a gateway's stats may carry.
const maxModels, maxModelName = 64, 256

// checkModels reports what is wrong with a backend's models: each a
// distinct, non-empty id of at most maxModelName bytes, at most maxModels.
func checkModels(b BackendFileSpec) error {
	if len(b.Models) > maxModels {
		return fmt.Errorf("backend %q: %d models, at most %d", b.Name, len(b.Models), maxModels)
	}
	seen := make(map[string]bool, len(b.Models))
	for _, m := range b.Models {
		if m == "" || len(m) > maxModelName || seen[m] {
			return fmt.Errorf("backend %q: model %q is empty, longer than %d bytes or listed twice; give each model id once, as its /v1/models lists it", b.Name, m, maxModelName)
		}
		seen[m] = true
	}
	return nil
}
