package main

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/fleet"
	"github.com/stargate-llm/stargate/serve/routerd"
)

// startAdminFleet starts the small live fleet on loopback and writes its
// HMAC key to a file.
func startAdminFleet(t *testing.T) (*fleet.Fleet, string) {
	t.Helper()
	reg := policy.NewRegistry()
	fl, _ := config.Preset("small")
	cfg, err := fl.SimConfig(config.Run{Policy: "pulsar-waw", RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := fleet.Start(ctx, cfg, reg, fleet.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	keyFile := writeKey(t, f.Key)
	return f, keyFile
}

func writeKey(t *testing.T, k auth.Key) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.txt")
	if err := os.WriteFile(path, []byte(k.ID+":"+string(k.Secret)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// oneLine checks that a failed command said one line on stderr with want.
func oneLine(t *testing.T, code, wantCode int, stderr, want string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit %d, want %d (stderr %q)", code, wantCode, stderr)
	}
	if strings.Count(strings.TrimRight(stderr, "\n"), "\n") != 0 || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q: want one line with %q", stderr, want)
	}
}

// TestAdminAgainstLiveFleet runs every stargate admin command against a
// live router, gateway and engine on loopback, and the bad inputs an
// operator may give.
func TestAdminAgainstLiveFleet(t *testing.T) {
	f, keyFile := startAdminFleet(t)
	rt, gw, eng := f.RouterURLs[0], f.GatewayURLs[0], f.EngineURLs[1] // engine 0 is killed below
	wrongKey := writeKey(t, auth.Key{ID: f.Key.ID, Secret: []byte("not-the-fleet-key-at-all")})
	closed := func() string { // a port nothing listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		return "http://" + addr
	}()

	t.Run("backends table", func(t *testing.T) {
		code, out, errOut := runCLI(t, "admin", "--router", rt, "backends")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{"BACKEND", "local-0", "local-1", "ready", "yes", " ms", " req", "0/1 workers", "0/2 workers"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("backends json", func(t *testing.T) {
		code, out, errOut := runCLI(t, "admin", "--router", rt, "--format", "json", "backends")
		var v routerd.AdminBackends
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Backends) != 2 || v.Backends[0].ID == "" {
			t.Fatalf("exit %d, %d backends: %s %s", code, len(v.Backends), out, errOut)
		}
	})
	t.Run("drain and undrain", func(t *testing.T) {
		code, out, errOut := runCLI(t, "admin", "--router", rt, "--key-file", keyFile, "--id", "router-0", "drain", "local-0")
		if code != 0 || !strings.Contains(out, "local-0: drained") {
			t.Fatalf("drain: exit %d: %s %s", code, out, errOut)
		}
		if st := f.Routers[0].States()["local-0"]; st != "draining" && st != "terminated" {
			t.Errorf("after drain the router says %s", st)
		}
		code, out, errOut = runCLI(t, "admin", "--router", rt, "--key-file", keyFile, "--id", "router-0", "--format", "json", "undrain", "local-0")
		if code != 0 || !strings.Contains(out, `"draining": false`) {
			t.Fatalf("undrain: exit %d: %s %s", code, out, errOut)
		}
		poll.Until(t, 5*time.Second, "local-0 to be ready again", func() bool { return f.Routers[0].States()["local-0"] == "ready" })
	})
	t.Run("release a quarantined worker", func(t *testing.T) {
		// With local-1 drained the router sends the stream to local-0 (a
		// gateway takes completions from routers, not from anyone).
		if code, _, errOut := runCLI(t, "admin", "--router", rt, "--key-file", keyFile, "--id", "router-0", "drain", "local-1"); code != 0 {
			t.Fatalf("drain local-1: %s", errOut)
		}
		stream := streamAt(t, rt)
		if code, _, errOut := runCLI(t, "admin", "--router", rt, "--key-file", keyFile, "--id", "router-0", "undrain", "local-1"); code != 0 {
			t.Fatalf("undrain local-1: %s", errOut)
		}
		if err := f.KillEngine(0); err != nil {
			t.Fatal(err)
		}
		stream()
		poll.Until(t, 10*time.Second, "the quarantine", func() bool { return len(f.Gateways[0].Quarantined()) == 1 })
		code, out, errOut := runCLI(t, "admin", "--gateway", gw, "--key-file", keyFile, "--id", "local-0", "release", "0")
		if code != 0 || !strings.Contains(out, "worker 0 released") || len(f.Gateways[0].Quarantined()) != 0 {
			t.Fatalf("release: exit %d: %s %s; quarantined %v", code, out, errOut, f.Gateways[0].Quarantined())
		}
		code, _, errOut = runCLI(t, "admin", "--gateway", gw, "--key-file", keyFile, "--id", "local-0", "release", "0")
		oneLine(t, code, 1, errOut, "not quarantined")
	})
	t.Run("faults", func(t *testing.T) {
		code, out, errOut := runCLI(t, "admin", "--engine", eng, "--key-file", keyFile, "--id", "local-1", "faults", "--error-rate", "0.5", "--exporter-dead")
		if code != 0 || !strings.Contains(out, `"error_rate":0.5`) {
			t.Fatalf("faults: exit %d: %s %s", code, out, errOut)
		}
		code, out, errOut = runCLI(t, "admin", "--engine", eng, "--key-file", keyFile, "--id", "local-1", "faults", "--clear")
		if code != 0 || !strings.Contains(out, `"error_rate":0`) {
			t.Fatalf("clear: exit %d: %s %s", code, out, errOut)
		}
	})

	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown backend", []string{"--router", rt, "--key-file", keyFile, "--id", "router-0", "drain", "nope"}, 1, `no backend "nope"`},
		{"unknown worker", []string{"--gateway", gw, "--key-file", keyFile, "--id", "local-0", "release", "7"}, 1, `no worker "7"`},
		{"worker not a number", []string{"--gateway", gw, "--key-file", keyFile, "--id", "local-0", "release", "first"}, 2, `worker "first"`},
		{"wrong key", []string{"--router", rt, "--key-file", wrongKey, "--id", "router-0", "drain", "local-1"}, 1, "401 Unauthorized"},
		{"wrong key at the engine", []string{"--engine", eng, "--key-file", wrongKey, "--id", "local-1", "faults", "--hang"}, 1, "signature does not match"},
		{"no key", []string{"--router", rt, "drain", "local-1"}, 2, "give --key-file"},
		{"missing key file", []string{"--router", rt, "--key-file", filepath.Join(t.TempDir(), "none"), "drain", "local-1"}, 2, "reading key file"},
		{"unreachable router", []string{"--router", closed, "backends"}, 1, "cannot reach the router at " + closed},
		{"no router", []string{"backends"}, 2, "give --router URL"},
		{"not a URL", []string{"--router", "127.0.0.1:8080", "backends"}, 2, "want an http(s) URL"},
		{"no backend named", []string{"--router", rt, "--key-file", keyFile, "--id", "router-0", "drain"}, 2, "the backend's name"},
		{"bad format", []string{"--router", rt, "--format", "yaml", "backends"}, 2, `--format "yaml"`},
		{"no fault given", []string{"--engine", eng, "--key-file", keyFile, "--id", "local-1", "faults"}, 2, "--clear"},
		{"fault out of range", []string{"--engine", eng, "--key-file", keyFile, "--id", "local-1", "faults", "--error-rate", "2"}, 2, "error_rate must be in [0, 1]"},
		{"gateway is no router", []string{"--router", gw, "backends"}, 1, "404"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, append([]string{"admin"}, c.args...)...)
			oneLine(t, code, c.code, errOut, c.want)
		})
	}
	poll.Until(t, 5*time.Second, "local-1 to stay ready after refused calls", func() bool { return f.Routers[0].States()["local-1"] == "ready" })
}

// streamAt starts a long stream at url and returns once it began;
// the returned function reads it to its end.
func streamAt(t *testing.T, url string) func() {
	t.Helper()
	body := `{"stream":true,"max_tokens":20000,"messages":[{"role":"user","content":"a long answer"}]}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		resp.Body.Close()
		t.Fatal(err)
	}
	return func() {
		for {
			if _, err := rd.ReadString('\n'); err != nil {
				break
			}
		}
		resp.Body.Close()
	}
}

// TestAdminCredentialsAndTLS: a read of a router that wants a client API key
// sends --api-key-file's key, and an https service is verified with
// --tls-ca-file; without them each call fails with one line saying which
// flag is missing.
func TestAdminCredentialsAndTLS(t *testing.T) {
	const key = "client-key-1"
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "this endpoint needs an API key", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"router":"router-1","backends":[]}`))
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewTLSServer(handler)
	defer secure.Close()
	dir := t.TempDir()
	keyFile, caFile := filepath.Join(dir, "api-key"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no api key", []string{"--router", plain.URL, "--format", "json", "backends"}, 1, "needs --api-key-file"},
		{"api key", []string{"--router", plain.URL, "--api-key-file", keyFile, "--format", "json", "backends"}, 0, `"router": "router-1"`},
		{"https without the CA", []string{"--router", secure.URL, "--api-key-file", keyFile, "--format", "json", "backends"}, 1, "certificate"},
		{"https with the CA", []string{"--router", secure.URL, "--api-key-file", keyFile, "--tls-ca-file", caFile, "--format", "json", "backends"}, 0, `"router": "router-1"`},
		{"certificate without its key", []string{"--router", secure.URL, "--tls-cert-file", caFile, "backends"}, 2, "together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"admin"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %q: want %q", code, tc.code, out, errOut, tc.want)
			}
		})
	}
}
