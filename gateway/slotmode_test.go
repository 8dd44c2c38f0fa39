package gateway

import (
	"errors"
	"testing"
)

func TestSlotModes(t *testing.T) {
	def := DefaultSlotsConfig()
	cases := []struct {
		mode      string
		given     int // 0: not set
		want      int
		wantLearn bool
		bad       bool
	}{
		{mode: "engine", want: def.MaxInflightPerWorker, wantLearn: true},
		{mode: "engine", given: 4, want: 4},
		{mode: "bounded", want: 1},
		{mode: "bounded", given: 2, want: 2},
		{mode: "bounded", given: 1, want: 1},
		{mode: "bounded", given: 3, bad: true},
		{mode: "bounded", given: 25, bad: true},
		{mode: "overlap", bad: true},
		{mode: "", bad: true},
	}
	for _, c := range cases {
		m, err := ParseSlotMode(c.mode)
		if err != nil {
			if !c.bad || !errors.Is(err, ErrBadSlotMode) {
				t.Errorf("mode %q: %v", c.mode, err)
			}
			continue
		}
		in := def
		if c.given > 0 {
			in.MaxInflightPerWorker = c.given
		}
		out, learn, err := m.Apply(in, c.given > 0)
		if c.bad {
			if !errors.Is(err, ErrBadSlotMode) {
				t.Errorf("mode %q with %d: error %v, want ErrBadSlotMode", c.mode, c.given, err)
			}
			continue
		}
		if err != nil || out.MaxInflightPerWorker != c.want || learn != c.wantLearn || out.MaxWaitingRequests != def.MaxWaitingRequests {
			t.Errorf("mode %q with %d: got %+v learn %v err %v, want %d learn %v", c.mode, c.given, out, learn, err, c.want, c.wantLearn)
		}
		if err := out.Validate(); err != nil {
			t.Errorf("mode %q with %d: applied config invalid: %v", c.mode, c.given, err)
		}
	}
	if _, _, err := SlotMode("nope").Apply(def, false); !errors.Is(err, ErrBadSlotMode) {
		t.Errorf("unknown mode applied: %v", err)
	}
}
