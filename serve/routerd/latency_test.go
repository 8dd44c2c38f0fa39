package routerd

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// tokenStream streams n events, flushing each after a short pause.
type tokenStream struct{ n int }

func (s tokenStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	f, _ := w.(http.Flusher)
	for i := range s.n {
		_, _ = fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
		f.Flush()
		time.Sleep(2 * time.Millisecond)
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// The router's /metrics has TTFT, inter-token and end-to-end histograms by
// backend and model; a model no backend lists by name (b, which lists
// none, serves it) is "other".
func TestLatencyHistograms(t *testing.T) {
	url, _ := startRouterWith(t, func(c *Config) {
		c.OpenInfo = true
		c.Static[0].Models = []string{"m1"}
	}, nil, tokenStream{n: 6}, tokenStream{n: 6}) // b lists no model: it takes any
	for _, m := range []string{"m1", "m1", "unlisted-but-served"} {
		resp, text := call(t, url, fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, m), nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(text, "[DONE]") {
			t.Fatalf("%s: %d %s", m, resp.StatusCode, text)
		}
	}
	fams := scrape(t, url)
	for _, name := range []string{"stargate_router_ttft_seconds", "stargate_router_inter_token_seconds", "stargate_router_request_duration_seconds"} {
		f := fams[name]
		if f == nil {
			t.Fatalf("%s is not exported", name)
		}
		counts := map[string]uint64{}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if b := labels["backend"]; b != "a" && b != "b" || labels["model"] == otherModel && b != "b" {
				t.Errorf("%s: labels %v", name, labels)
			}
			counts[labels["model"]] += m.GetHistogram().GetSampleCount()
		}
		per := uint64(1)
		if name == "stargate_router_inter_token_seconds" {
			per = 5 // six events, the first is the TTFT
		}
		if counts["m1"] != 2*per || counts[otherModel] != per || len(counts) != 2 {
			t.Errorf("%s samples by model %v, want m1 %d and other %d", name, counts, 2*per, per)
		}
	}
}
