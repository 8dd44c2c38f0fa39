package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// TestFleetPressureSection: a fleet file's pressure section sets the
// pressure policy's weights, levels and projection, keeping the defaults of
// what it leaves out; bad names and values are errors that say what is wrong.
func TestFleetPressureSection(t *testing.T) {
	f, err := Parse("p.yaml", []byte(oneRegion+`pressure:
  weights: {queue: 0.5, gpu: 0, thermal: 0.3}
  norm: {ttft_full: 2s, queue_full: 0.25}
  projection: {max: 50, min: 2, hysteresis: 5}
  sticky: {sessions: 1000, move_score: 0.5, reprefill_tps: 20000}
  burst: {window: 50ms, false_alarms: 2, hysteresis: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	pp := f.Policy.Pressure
	if pp == nil {
		t.Fatal("pressure section not applied")
	}
	want := policy.DefaultPressureParams()
	want.Weights[telemetry.SigQueue], want.Weights[telemetry.SigGPU], want.Weights[telemetry.SigThermal] = 0.5, 0, 0.3
	want.Norm.TTFTFull, want.Norm.QueueFull = 2*time.Second, 0.25
	want.Projector = telemetry.Projector{Max: 50, Min: 2, Hysteresis: 5}
	want.Sticky.Sessions, want.Sticky.MoveScore, want.Sticky.RePrefillTPS = 1000, 0.5, 20000
	want.Burst.Window, want.Burst.FalseAlarms, want.Burst.Hysteresis = 50*time.Millisecond, 2, 3
	if *pp != want {
		t.Errorf("got %+v\nwant %+v", *pp, want)
	}
	// The policy built from the fleet's params uses them.
	pol, err := policy.NewRegistry().New("pressure", f.Policy, []policy.Backend{{Name: "a"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := policy.WeightsOf(pol, []policy.View{{Capacity: 4, Eligible: true}})
	if ws[0].Rank != 50 || ws[0].Weight != 200 {
		t.Errorf("idle backend of capacity 4: level %d weight %d, want 50 and 200 (projection max 50)", ws[0].Rank, ws[0].Weight)
	}

	// No section, or one that changes nothing: the defaults.
	for _, doc := range []string{oneRegion, oneRegion + "pressure: {weights: {queue: 0.25}}\n"} {
		f, err := Parse("d.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if f.Policy.Pressure != nil {
			t.Errorf("%q: pressure params %+v, want nil (defaults)", doc, *f.Policy.Pressure)
		}
	}

	bad := []struct{ section, want string }{
		{"pressure: {weights: {queu: 1}}", `unknown signal "queu"`},
		{"pressure: {weights: {queue: -1}}", "weight of queue must be 0 or between"},
		{"pressure: {norm: {ttft_ful: 1s}}", `unknown field "ttft_ful"`},
		{"pressure: {norm: {queue_full: 0}}", "queue_full must be a finite number > 0"},
		{"pressure: {norm: {overload_full: 2}}", "overload_full must be in (0,1]"},
		{"pressure: {projection: {min: 0}}", "want 1 <= min <= max"},
		{"pressure: {thermal: 1}", `unknown field "thermal"`},
		{"pressure: {sticky: {move_score: 0}}", "move_score must be in (0,1]"},
		{"pressure: {sticky: {sessions: -1}}", "sessions must be 0 (off) or between 2"},
		{"pressure: {sticky: {sessions: 1}}", "sessions must be 0 (off) or between 2"},
		{"pressure: {sticky: {sessions: 10, ttl: 0s}}", "ttl must be > 0"},
		{"pressure: {sticky: {reprefill_tps: -5}}", "reprefill_tps must be a finite number >= 0"},
		{"pressure: {sticky: {session: 5}}", `unknown field "session"`},
		{"pressure: {burst: {window: -1s}}", "window must be 0 (off) or between 1ms and 10s"},
		{"pressure: {burst: {baseline: 500ms}}", "baseline must be at least 10 windows"},
		{"pressure: {burst: {false_alarms: 0}}", "false_alarms must be between 0.01 and 3600"},
		{"pressure: {burst: {hold: 2m}}", "hold must be between 0 and 1m"},
		{"pressure: {burst: {hysteresis: 0}}", "hysteresis must be at least 1 level"},
		{"pressure: {burst: {windw: 1s}}", `unknown field "windw"`},
	}
	for _, tt := range bad {
		_, err := Parse("bad.yaml", []byte(oneRegion+tt.section+"\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got error %v, want one containing %q", tt.section, err, tt.want)
		}
	}
}

// TestLoadPressure: a router's --pressure file holds the section's contents.
func TestLoadPressure(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("weights: {jitter: 0}\nprojection: {hysteresis: 20}\nsticky: {sessions: 0}\nburst: {window: 0s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("weight: {jitter: 0}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pp, err := LoadPressure(good)
	if err != nil {
		t.Fatal(err)
	}
	if pp.Weights[telemetry.SigJitter] != 0 || pp.Projector.Hysteresis != 20 || pp.Sticky.Sessions != 0 || pp.Burst.Window != 0 || pp.Burst.Hold != policy.DefaultBurstParams().Hold || pp.Sticky.MoveScore != policy.DefaultPressureParams().Sticky.MoveScore || pp.Weights[telemetry.SigErrors] != policy.DefaultPressureParams().Weights[telemetry.SigErrors] {
		t.Errorf("got %+v", pp)
	}
	if _, err := LoadPressure(bad); err == nil || !strings.Contains(err.Error(), `unknown field "weight"`) {
		t.Errorf("bad file: got %v", err)
	}
	if _, err := LoadPressure(filepath.Join(dir, "none.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}
