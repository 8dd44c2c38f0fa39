package engined

import (
	"encoding/json"
	"net/http"
	"testing"
)

// Two engines (two backends of one router) never give the same completion
// id: ids start with a tag random per process.
func TestCompletionIDsUniqueAcrossEngines(t *testing.T) {
	seen := map[string]string{}
	for _, name := range []string{"a", "b"} {
		_, url := start(t, nil)
		for range 3 {
			resp, body := post(t, url+"/v1/chat/completions", `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, nil)
			var c struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(body, &c); err != nil || resp.StatusCode != http.StatusOK || c.ID == "" {
				t.Fatalf("engine %s: %d %s", name, resp.StatusCode, body)
			}
			if other, ok := seen[c.ID]; ok {
				t.Fatalf("engine %s repeated id %s of engine %s", name, c.ID, other)
			}
			seen[c.ID] = name
		}
	}
}
