package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/routerd"
	"github.com/stargate-llm/stargate/serve/tlsconf"
)

// adminSender is the sender name an operator's signed calls carry.
const adminSender = "operator"

// adminTarget is where an admin command goes and how it signs.
type adminTarget struct {
	router, gateway, engine string
	keyFile                 string
	id                      string
	apiKeyFile              string
	caFile, certFile        string
	certKeyFile             string
	client                  *http.Client
	format                  string
	timeout                 time.Duration
}

// signAdmin builds an operator's signed request. Every signed call of
// stargate admin goes through here: the one place that knows how admin
// calls are signed (package auth).
// A signature names its audience ("router/ID", "gateway/ID", "engine/ID"), so
// a call signed for one service is refused by every other.
func signAdmin(ctx context.Context, key auth.Key, audience, method, target string, body []byte) (*http.Request, error) {
	req, err := auth.NewSigner(key, adminSender).NewRequest(audience, method, target, body)
	if err != nil {
		return nil, err
	}
	return req.WithContext(ctx), nil
}

func newAdminCmd() *cobra.Command {
	var t adminTarget
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Operator calls: list backends, drain, undrain, release a worker, inject engine faults",
		Long: `Talk to a running router (--router), gateway (--gateway) or stargate engine
(--engine) as an operator. Calls that change something are signed with the
HMAC key the services share (--key-file, the file given to their
--hmac-key-file); reading the backends needs no key.

  backends          the router's backends (GET /v1/stargate/backends)
  drain BACKEND     stop new requests to a backend at this router
  undrain BACKEND   take new requests again
  release WORKER    end a gateway worker's quarantine (the worker's number)
  faults            set a stargate engine's injected faults

Output is a table, or the services' JSON with --format json. An error is
one line on stderr and a non-zero exit status.`,
		Example: `  stargate admin --router http://127.0.0.1:8080 backends
  stargate admin --router http://127.0.0.1:8080 --key-file key.txt --id router-1 drain gw-a
  stargate admin --gateway http://127.0.0.1:9001 --key-file key.txt --id gw-a release 0
  stargate admin --engine http://127.0.0.1:8001 --key-file key.txt --id engine faults --error-rate 0.2`,
		Args: cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&t.router, "router", "", "router URL (backends, drain, undrain)")
	pf.StringVar(&t.gateway, "gateway", "", "gateway URL (release)")
	pf.StringVar(&t.engine, "engine", "", "stargate engine URL (faults)")
	pf.StringVar(&t.keyFile, "key-file", "", "key file that signs the call: the services' --hmac-key-file (its operator key, or a one-key ID:SECRET file)")
	pf.StringVar(&t.id, "id", "", "the --id of the router, gateway or engine the call goes to (a signature names its audience); required for signed calls")
	pf.StringVar(&t.apiKeyFile, "api-key-file", "", "file holding a client API key, sent as Authorization: Bearer on reads (a router or gateway started with --api-keys)")
	pf.StringVar(&t.caFile, "tls-ca-file", "", "verify https services against these CAs (PEM) instead of the system's")
	pf.StringVar(&t.certFile, "tls-cert-file", "", "client certificate (PEM) for services with --client-ca-file: an operator's (spiffe://stargate/operator/NAME)")
	pf.StringVar(&t.certKeyFile, "tls-private-key-file", "", "the private key of --tls-cert-file")
	pf.StringVar(&t.format, "format", "table", "output: table or json")
	pf.DurationVar(&t.timeout, "timeout", 10*time.Second, "give up on a call after this long")

	backends := &cobra.Command{
		Use: "backends", Short: "List the router's backends", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			base, err := t.base("router", t.router)
			if err != nil {
				return err
			}
			body, err := t.call(c.Context(), auth.Key{}, http.MethodGet, base+"/v1/stargate/backends", nil, "router")
			if err != nil {
				return err
			}
			if t.format == "json" {
				return writeJSONBody(c.OutOrStdout(), body)
			}
			var v routerd.AdminBackends
			if err := json.Unmarshal(body, &v); err != nil {
				return failure{fmt.Errorf("router at %s answered no backends list: %w", base, err)}
			}
			return backendsTable(c.OutOrStdout(), &v)
		},
	}
	drain := func(on bool) *cobra.Command {
		verb := map[bool]string{true: "drain", false: "undrain"}[on]
		return &cobra.Command{
			Use: verb + " BACKEND", Short: map[bool]string{true: "Stop new requests to a backend", false: "Take new requests again"}[on],
			Args: exactArgs(1, "the backend's name (see stargate admin backends)"),
			RunE: func(c *cobra.Command, args []string) error {
				base, err := t.base("router", t.router)
				if err != nil {
					return err
				}
				key, err := t.key()
				if err != nil {
					return err
				}
				body, err := t.call(c.Context(), key, http.MethodPost, base+"/admin/backends/"+url.PathEscape(args[0])+"/"+verb, nil, "router")
				if err != nil {
					return err
				}
				return t.print(c.OutOrStdout(), body, fmt.Sprintf("%s: %sed at %s", args[0], verb, base))
			},
		}
	}
	release := &cobra.Command{
		Use: "release WORKER", Short: "End a gateway worker's quarantine",
		Args: exactArgs(1, "the worker's number (0, 1, ...)"),
		RunE: func(c *cobra.Command, args []string) error {
			w, err := strconv.Atoi(args[0])
			if err != nil || w < 0 {
				return usagef("worker %q: want the worker's number, 0 or more", args[0])
			}
			base, err := t.base("gateway", t.gateway)
			if err != nil {
				return err
			}
			key, err := t.key()
			if err != nil {
				return err
			}
			body, err := t.call(c.Context(), key, http.MethodPost, fmt.Sprintf("%s/admin/workers/%d/release", base, w), nil, "gateway")
			if err != nil {
				return err
			}
			return t.print(c.OutOrStdout(), body, fmt.Sprintf("worker %d released at %s", w, base))
		},
	}
	var f engined.Faults
	var clearFaults bool
	faults := &cobra.Command{
		Use: "faults", Short: "Set a stargate engine's injected faults (replacing those in force)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if f == (engined.Faults{}) && !clearFaults {
				return usagef("faults: give a fault (see --help) or --clear to remove them all")
			}
			if clearFaults && f != (engined.Faults{}) {
				return usagef("faults: --clear with a fault; give one or the other")
			}
			if err := f.Validate(); err != nil {
				return usageError{err}
			}
			base, err := t.base("engine", t.engine)
			if err != nil {
				return err
			}
			key, err := t.key()
			if err != nil {
				return err
			}
			payload, err := json.Marshal(f)
			if err != nil {
				return failure{err}
			}
			body, err := t.call(c.Context(), key, http.MethodPost, base+"/admin/faults", payload, "engine")
			if err != nil {
				return err
			}
			return t.print(c.OutOrStdout(), body, fmt.Sprintf("faults at %s: %s", base, strings.TrimSpace(string(body))))
		},
	}
	ff := faults.Flags()
	ff.Float64Var(&f.ErrorRate, "error-rate", 0, "fail this share of requests (0-1) with a 500")
	ff.BoolVar(&f.Hang, "hang", false, "accept requests and never answer")
	ff.IntVar(&f.MaxModelLen, "max-model-len", 0, "enforce a lower context limit than advertised (tokens)")
	ff.Float64Var(&f.Slowdown, "slowdown", 0, "multiply every step's cost (1-100)")
	ff.Float64Var(&f.HeatC, "heat-c", 0, "degrees the mock DCGM exporter adds")
	ff.DurationVar(&f.Ramp, "ramp", 0, "ramp slowdown and heat in over this long")
	ff.Float64Var(&f.MinClock, "min-clock", 0, "thermal fault: the clock falls to this share of nominal (0-1)")
	ff.BoolVar(&f.ExporterDead, "exporter-dead", false, "make the mock DCGM exporter answer 503")
	ff.BoolVar(&clearFaults, "clear", false, "remove every fault")

	cmd.AddCommand(backends, drain(true), drain(false), release, faults)
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if t.format != "table" && t.format != "json" {
			return usagef("--format %q: want table or json", t.format)
		}
		if t.timeout <= 0 {
			return usagef("--timeout %v: want a positive duration", t.timeout)
		}
		return nil
	}
	return cmd
}

// exactArgs is cobra.ExactArgs with a message that says what is missing.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %d argument, %s; got %d", c.Name(), n, what, len(args))
		}
		return nil
	}
}

// base checks the service URL a command needs.
func (t *adminTarget) base(service, raw string) (string, error) {
	if raw == "" {
		return "", usagef("this command talks to a %s: give --%s URL", service, service)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usagef("--%s %q: want an http(s) URL such as http://127.0.0.1:8080", service, raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

func (t *adminTarget) key() (auth.Key, error) {
	if t.keyFile == "" {
		return auth.Key{}, usagef("this call is signed: give --key-file, the HMAC key file the services were started with")
	}
	ring, err := auth.LoadKeyring(t.keyFile)
	if err != nil {
		return auth.Key{}, usageError{err}
	}
	k, ok := ring.Signing(auth.RoleOperator)
	if !ok {
		return auth.Key{}, usagef("%s has no operator key: add a line \"operator KEY-ID SECRET\"", t.keyFile)
	}
	if t.id == "" {
		return auth.Key{}, usagef("this call is signed for one service: give --id, the --id the service was started with")
	}
	return k, nil
}

// call sends one request (signed when key is set) and returns the answer's
// body, or an error of one line that says what went wrong.
func (t *adminTarget) call(ctx context.Context, key auth.Key, method, target string, body []byte, service string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var req *http.Request
	var err error
	if len(key.Secret) > 0 {
		req, err = signAdmin(ctx, key, auth.Audience(service, t.id), method, target, body)
	} else {
		req, err = http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	}
	if err != nil {
		return nil, usagef("%s %s: %v", method, target, err)
	}
	if !signed(key) {
		if err := t.bearer(req); err != nil {
			return nil, err
		}
	}
	hc, err := t.httpClient()
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, failure{fmt.Errorf("cannot reach the %s at %s: %w", service, target, err)}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, failure{fmt.Errorf("reading the %s's answer: %w", service, err)}
	}
	if resp.StatusCode/100 != 2 {
		msg := errorText(out)
		if resp.StatusCode == http.StatusUnauthorized {
			if signed(key) {
				msg += " (is --key-file the key the " + service + " was started with, and --id its --id?)"
			} else {
				msg += " (a " + service + " with --api-keys needs --api-key-file)"
			}
		}
		return nil, failure{fmt.Errorf("the %s refused %s %s: %d %s: %s", service, method, req.URL.Path, resp.StatusCode, http.StatusText(resp.StatusCode), msg)}
	}
	return out, nil
}

func signed(key auth.Key) bool { return len(key.Secret) > 0 }

// bearer adds the client API key of --api-key-file to a read.
func (t *adminTarget) bearer(req *http.Request) error {
	if t.apiKeyFile == "" {
		return nil
	}
	b, err := os.ReadFile(t.apiKeyFile)
	if err != nil {
		return usagef("--api-key-file: %v", err)
	}
	k := strings.TrimSpace(string(b))
	if k == "" {
		return usagef("--api-key-file %s is empty", t.apiKeyFile)
	}
	req.Header.Set("Authorization", "Bearer "+k)
	return nil
}

// httpClient is the client of every call: the default one, or one that
// verifies https services with --tls-ca-file and shows --tls-cert-file.
func (t *adminTarget) httpClient() (*http.Client, error) {
	if t.client != nil {
		return t.client, nil
	}
	if t.caFile == "" && t.certFile == "" && t.certKeyFile == "" {
		t.client = http.DefaultClient
		return t.client, nil
	}
	if (t.certFile == "") != (t.certKeyFile == "") {
		return nil, usagef("give --tls-cert-file and --tls-private-key-file together")
	}
	o := tlsconf.ClientOptions{CAFile: t.caFile}
	if t.certFile != "" {
		r, err := tlsconf.NewReloader(t.certFile, t.certKeyFile)
		if err != nil {
			return nil, usageError{err}
		}
		o.Cert = r
	}
	cfg, err := o.Client()
	if err != nil {
		return nil, usageError{err}
	}
	t.client = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	return t.client, nil
}

// errorText is an answer's error message on one line: an OpenAI-shaped
// error's message, or the text.
func errorText(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		b = []byte(e.Error.Message)
	}
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	if s == "" {
		s = "(no message)"
	}
	return s
}

func (t *adminTarget) print(w io.Writer, body []byte, line string) error {
	if t.format == "json" {
		return writeJSONBody(w, body)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

func writeJSONBody(w io.Writer, body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		buf.Reset()
		buf.Write(bytes.TrimSpace(body))
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// backendsTable writes the router's backends as a table, every number with
// its unit.
func backendsTable(w io.Writer, v *routerd.AdminBackends) error {
	fmt.Fprintf(w, "router %s, policy %s, at %s\n", v.Router, v.Policy, v.Time.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tREGION\tSTATE\tELIGIBLE\tWEIGHT\tSLOTS\tQUEUE\tTTFT P95\tKV\tERRORS\tCONTEXT\tRTT\tQUARANTINED\tTELEMETRY")
	for _, b := range v.Backends {
		el := "yes"
		if !b.Eligible {
			el = "no: " + strings.Join(b.Ineligible, ",")
		}
		ctx := tokens(b.ContextTokens)
		if b.LearnedContextTokens > 0 {
			ctx = tokens(b.LearnedContextTokens) + " learned of " + tokens(b.AdvertisedContextTokens)
		}
		tel := "full"
		if b.TelemetryFallback {
			tel = "fallback"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d (%.0f%%)\t%d/%d req\t%d req\t%s\t%.0f%%\t%.1f%%\t%s\t%s\t%d/%d workers\t%s\n",
			b.Name, cmpOrDash(b.Region), b.State, el, b.Weight, 100*b.WeightShareRatio, b.ActiveRequests, b.CapacityRequests,
			b.WaitingRequests+b.RouterQueuedRequests, millis(b.TTFTP95Seconds), 100*b.KVFillRatio, 100*b.ErrorRatio, ctx,
			millis(b.RTTSeconds), b.QuarantinedWorkers, b.Workers, tel)
	}
	return tw.Flush()
}

func millis(s float64) string { return strconv.FormatFloat(1000*s, 'f', 1, 64) + " ms" }

func tokens(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n) + " tok"
}

func cmpOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
