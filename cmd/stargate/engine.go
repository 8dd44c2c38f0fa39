package main

import (
	"context"
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/httplimit"
	"github.com/stargate-llm/stargate/serve/tlsconf"
)

func newEngineCmd() *cobra.Command {
	cfg := engined.DefaultConfig()
	var profile, listen, fenceKey, pprofAddr, compat string
	var sec secureFlags
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Serve a mock OpenAI-compatible engine whose GPUs run the engine model",
		Long: `Serve POST /v1/chat/completions, POST /v1/completions, GET /v1/models and
GET /health on --listen, with --gpus workers of the engine model on the real
clock. Tokens stream at the pace of the model's steps.`,
		Example: `  stargate engine --gpus 2 --listen 127.0.0.1:8001
  curl -s 127.0.0.1:8001/v1/chat/completions -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":8}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := config.LoadProfile(profile)
			if err != nil {
				return usageError{err}
			}
			cfg.Profile = p
			if cfg.Compat, err = engined.ParseCompat(compat); err != nil {
				return usagef("--compat: %v", err)
			}
			if err := loadKeys(fenceKey, auth.RoleGateway, &cfg.Keys, &cfg.Key); err != nil {
				return err
			}
			cfg.Logger = logger(cmd.ErrOrStderr(), false)
			srv, err := engined.New(cfg)
			if err != nil {
				return usageError{err}
			}
			log := logger(cmd.ErrOrStderr(), false)
			// Gateways, routers running their gateway in process, and operators.
			tlsCfg, err := sec.server(log, true, tlsconf.RoleGateway, tlsconf.RoleRouter, tlsconf.RoleOperator)
			if err != nil {
				return err
			}
			pprofCfg, err := sec.pprofTLS(log)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return usagef("--listen %q: %v", listen, err)
			}
			if err := startPprof(cmd.Context(), pprofAddr, cmd.ErrOrStderr(), pprofCfg); err != nil {
				_ = ln.Close()
				return err
			}
			return serve(cmd.Context(), cmd, ln, srv, sec.options("engine", tlsCfg, log))
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.GPUs, "gpus", cfg.GPUs, "GPU workers")
	f.StringVar(&profile, "profile", "half", "engine profile: half, full, half-host, full-host (with a host-memory KV tier) or a YAML file of profile fields (base_ms, per_decode_seq_ms, host_kv_tokens, ...)")
	f.StringVar(&cfg.Model, "model", cfg.Model, "model name served")
	f.IntVar(&cfg.MaxModelLen, "max-model-len", cfg.MaxModelLen, "longest prompt plus output, in tokens")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the output text")
	f.StringVar(&listen, "listen", "127.0.0.1:8001", "address to listen on")
	f.StringVar(&pprofAddr, "pprof", "", pprofFlagUsage)
	f.BoolVar(&cfg.StampTTFT, "stamp-ttft", false, "precede each stream's first token with an SSE comment giving the engine's own time to it (for bench/proxy.sh)")
	f.StringVar(&fenceKey, "hmac-key-file", "", "file of HMAC keys (docs/security.md): the gateway key signs idle fences, operator keys check POST /admin/faults")
	f.StringVar(&cfg.ID, "id", "engine", "this engine's name, which operators' signed calls address (engine/ID)")
	f.StringVar(&compat, "compat", "stargate", "whose behaviour to copy where engines differ: stargate, or vllm (one worker, no fence, vLLM's errors and /tokenize) to test Stargate against a vLLM-like engine")
	f.StringVar(&cfg.APIKey, "api-key", "", "require Authorization: Bearer KEY on /v1 paths, as vLLM's --api-key")
	f.DurationVar(&cfg.LoadTime, "load-time", 0, "pretend to load the model this long after start: /health 503, no model listed, completions 503 (as vLLM while it loads)")
	addSecureFlags(f, &sec, false)
	f.Float64Var(&cfg.Faults.ErrorRate, "fault-error-rate", 0, "operator fault: fail this share of requests with a 500")
	f.BoolVar(&cfg.Faults.Hang, "fault-hang", false, "operator fault: accept requests and never answer")
	f.IntVar(&cfg.Faults.MaxModelLen, "fault-max-model-len", 0, "operator fault: enforce this context limit while advertising --max-model-len")
	f.Float64Var(&cfg.Faults.Slowdown, "fault-slowdown", 0, "operator fault: thermal throttle multiplying step cost (>= 1), ramping over --fault-ramp")
	f.Float64Var(&cfg.Faults.HeatC, "fault-heat", 0, "operator fault: degrees the mock GPU temperature rises with the throttle")
	f.DurationVar(&cfg.Faults.Ramp, "fault-ramp", 0, "operator fault: how long the thermal throttle takes to reach full strength")
	f.BoolVar(&cfg.Faults.ExporterDead, "fault-exporter-dead", false, "operator fault: the mock DCGM exporter (GET /dcgm/metrics) answers 503")
	return cmd
}

// serve runs srv on ln until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cmd *cobra.Command, ln net.Listener, srv *engined.Server, o httplimit.Options) error {
	// The engine's clock outlives the signal: requests in flight get the
	// shutdown grace to finish, then the clock stops.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	done := make(chan struct{})
	go func() { srv.Run(runCtx); close(done) }()
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "stargate engine serving on %s://%s\n", scheme, ln.Addr())
	err := serveHandler(ctx, ln, srv.Handler(), o)
	stopRun()
	<-done
	return err
}
