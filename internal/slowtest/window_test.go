package slowtest

import (
	"testing"
	"time"
)

func TestParseWindow(t *testing.T) {
	tests := []struct {
		in              string
		warmup, measure time.Duration
		bad             bool
	}{
		{"", 240 * time.Second, 240 * time.Second, false},
		{"60s+30s", 60 * time.Second, 30 * time.Second, false},
		{"0s+1m", 0, time.Minute, false},
		{"60s", 0, 0, true},
		{"60+60", 0, 0, true},
		{"60s+x", 0, 0, true},
		{"60s+0s", 0, 0, true},
		{"-1s+60s", 0, 0, true},
	}
	for _, tt := range tests {
		warmup, measure, err := parseWindow(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("%q: accepted (%v+%v), want an error", tt.in, warmup, measure)
			}
			continue
		}
		if err != nil || warmup != tt.warmup || measure != tt.measure {
			t.Errorf("%q: %v+%v, %v; want %v+%v", tt.in, warmup, measure, err, tt.warmup, tt.measure)
		}
	}
}
