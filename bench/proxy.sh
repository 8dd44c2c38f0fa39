#!/usr/bin/env bash
# Proxy benchmark: the mock engine called directly, through Stargate (router
# + gateway as two processes, over HTTP/2 (h2c) and over HTTP/1.1, and as one
# process) and through nginx (proxy_buffering off), side by side in one run,
# 200 concurrent streaming clients. See BENCHMARKS.md ("Proxy path").
#
#   bench/proxy.sh                      # everything, about 9 minutes
#   REPS=5 DURATION=20s bench/proxy.sh  # longer
#
# Settings (environment):
#   STREAMS=200      concurrent closed-loop clients
#   WARMUP=3s        per measurement, before the measured window
#   DURATION=10s     measured window
#   REPS=3           repetitions of every measurement; the table gives medians
#   THINK=200ms      mean think time of the paced runs (0 runs only saturated)
#   MAX_TOKENS=16    output tokens per request
#   PIN=1            proxies on CPU 1, engine and load generator on CPU 0
#   MODE=registered  the gateway registers with the router (signed stats);
#                    MODE=static lists it with --backend instead
#   PROFILE=1        capture CPU profiles of router and gateway under load
#   PROXY_ENV=       environment for router and gateway, e.g. "GOMAXPROCS=2"
#   TARGETS="engine stargate stargate-1proc stargate-http nginx"  what to
#                    measure (engine first); stargate-1proc is a router that
#                    runs the gateway in its own process (--gateway-engine),
#                    stargate-http a second router (--http2=false) and gateway
#                    pair; each idles while the others are measured
#   OUT=out/bench-proxy  where the run lines, tables and profiles go
#   ENGINE_TRANSPORT=net-http  how the gateways reach the engine: net-http
#                    or h1 (stargate gateway --engine-transport)
#   TLS=0            1: the clients reach the routers and nginx over HTTPS
#                    (one self-signed ECDSA P-256 certificate made with
#                    openssl, kept-alive connections); the gateways report to
#                    their routers over HTTPS; the engine called directly and
#                    the hops behind the proxies stay plain HTTP
#
# Installs nginx from Debian (apt-get) if it is missing; that needs root.
# Everything listens on 127.0.0.1 ports 18001-18202; all processes stop at exit.
set -euo pipefail

STREAMS=${STREAMS:-200}
WARMUP=${WARMUP:-3s}
DURATION=${DURATION:-10s}
REPS=${REPS:-3}
THINK=${THINK:-200ms}
MAX_TOKENS=${MAX_TOKENS:-16}
PIN=${PIN:-1}
MODE=${MODE:-registered}
PROFILE=${PROFILE:-1}
TARGETS=${TARGETS:-engine stargate stargate-1proc stargate-http nginx}
TLS=${TLS:-0}
ENGINE_TRANSPORT=${ENGINE_TRANSPORT:-net-http}

cd "$(dirname "$0")/.."
root=$(pwd)
OUT=${OUT:-out/bench-proxy}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/stargate-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ENGINE=127.0.0.1:18001 GATEWAY=127.0.0.1:18101 ROUTER=127.0.0.1:18080 ROUTER_HTTP=127.0.0.1:18081 GATEWAY_HTTP=127.0.0.1:18102 ROUTER_1P=127.0.0.1:18082 NGINX=127.0.0.1:18090
GW_PPROF=127.0.0.1:18201 RT_PPROF=127.0.0.1:18202

# nginx from Debian.
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
	echo "installing nginx from Debian" >&2
	as_root=()
	if [ "$(id -u)" != 0 ]; then
		if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
			as_root=(sudo -n)
		else
			echo "nginx is missing and this user cannot install it; run: apt-get install nginx (as root)" >&2
			exit 1
		fi
	fi
	"${as_root[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends nginx >/dev/null
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

echo "building" >&2
go build -o "$work/stargate" ./cmd/stargate
go build -o "$work/proxyload" ./cmd/proxyload

# TLS=1: a self-signed certificate for 127.0.0.1; cs is the clients' scheme.
cs=http curl_tls=() router_tls=() gateway_tls=() load_tls=()
if [ "$TLS" = 1 ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout "$work/tls-key.pem" -out "$work/tls.pem" \
		-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
	cs=https curl_tls=(--cacert "$work/tls.pem")
	router_tls=(--tls-cert-file "$work/tls.pem" --tls-private-key-file "$work/tls-key.pem" --tls-ca-file "$work/tls.pem")
	gateway_tls=(--tls-ca-file "$work/tls.pem")
	load_tls=(--ca-file "$work/tls.pem")
fi

# CPU placement: with PIN=1 and 2+ CPUs the proxies run on CPU 1, the engine
# and the load generator on CPU 0 (Go sizes GOMAXPROCS to the CPUs allowed).
client=() proxy=() workers=auto
if [ "$PIN" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
	client=(taskset -c 0) proxy=(taskset -c 1) workers=1
fi
if [ -n "${PROXY_ENV:-}" ]; then
	read -ra proxy_env <<<"$PROXY_ENV"
	proxy=(env "${proxy_env[@]}" "${proxy[@]}")
fi

{
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "go: $(go version | cut -d' ' -f3), nginx: $("$nginx_bin" -v 2>&1 | cut -d/ -f2)"
	echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)')"
	echo "settings: STREAMS=$STREAMS WARMUP=$WARMUP DURATION=$DURATION REPS=$REPS THINK=$THINK MAX_TOKENS=$MAX_TOKENS PIN=$PIN MODE=$MODE ENGINE_TRANSPORT=$ENGINE_TRANSPORT PROXY_ENV=${PROXY_ENV:-} TLS=$TLS"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt" >&2

start() { # start NAME CMD...: run in the background, log to $work/NAME.log
	local name=$1
	shift
	"$@" >"$work/$name.log" 2>&1 &
	pids+=($!)
}

wait_for() { # wait_for WHAT CMD...: retry CMD for up to 15 s
	local what=$1
	shift
	for _ in $(seq 150); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	echo "$what did not come up; logs in $work:" >&2
	tail -n 5 "$work"/*.log >&2
	exit 1
}

start engine "${client[@]}" "$work/stargate" engine --gpus 1 --profile bench/engine-fast.yaml --stamp-ttft --listen "$ENGINE"
engine_pid=${pids[-1]}
wait_for engine curl -sf "http://$ENGINE/health"

printf 'bench:%s\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$work/key.txt"
gateway_args=(--engine "http://$ENGINE" --max-inflight-per-worker 512 --engine-transport "$ENGINE_TRANSPORT")
case $MODE in
registered)
	start router "${proxy[@]}" "$work/stargate" router --listen "$ROUTER" --hmac-key-file "$work/key.txt" --pprof "$RT_PPROF" "${router_tls[@]}"
	router_pid=${pids[-1]}
	start gateway "${proxy[@]}" "$work/stargate" gateway "${gateway_args[@]}" --listen "$GATEWAY" --id gw-bench --pprof "$GW_PPROF" \
		--router "$cs://$ROUTER" --hmac-key-file "$work/key.txt" "${gateway_tls[@]}"
	gateway_pid=${pids[-1]}
	start router-http "${proxy[@]}" "$work/stargate" router --listen "$ROUTER_HTTP" --http2=false --id router-http --hmac-key-file "$work/key.txt" "${router_tls[@]}"
	router_http_pid=${pids[-1]}
	start gateway-http "${proxy[@]}" "$work/stargate" gateway "${gateway_args[@]}" --listen "$GATEWAY_HTTP" --id gw-http \
		--router "$cs://$ROUTER_HTTP" --hmac-key-file "$work/key.txt" "${gateway_tls[@]}"
	;;
static)
	start router "${proxy[@]}" "$work/stargate" router --listen "$ROUTER" --backend "gw-bench=http://$GATEWAY@512" --pprof "$RT_PPROF" "${router_tls[@]}"
	router_pid=${pids[-1]}
	start gateway "${proxy[@]}" "$work/stargate" gateway "${gateway_args[@]}" --listen "$GATEWAY" --id gw-bench --pprof "$GW_PPROF"
	gateway_pid=${pids[-1]}
	start router-http "${proxy[@]}" "$work/stargate" router --listen "$ROUTER_HTTP" --http2=false --id router-http --backend "gw-http=http://$GATEWAY_HTTP@512" "${router_tls[@]}"
	router_http_pid=${pids[-1]}
	start gateway-http "${proxy[@]}" "$work/stargate" gateway "${gateway_args[@]}" --listen "$GATEWAY_HTTP" --id gw-http
	;;
*)
	echo "MODE=$MODE: want registered or static" >&2
	exit 2
	;;
esac
gateway_http_pid=${pids[-1]}
start router-1proc "${proxy[@]}" "$work/stargate" router --listen "$ROUTER_1P" --id router-1proc --hmac-key-file "$work/key.txt" \
	--gateway-engine "http://$ENGINE" --gateway-engine-transport "$ENGINE_TRANSPORT" --gateway-id gw-1proc --gateway-max-inflight-per-worker 512 "${router_tls[@]}"
router_1p_pid=${pids[-1]}
wait_for gateway curl -sf "http://$GATEWAY/health"
wait_for gateway-http curl -sf "http://$GATEWAY_HTTP/health"
for r in "$ROUTER" "$ROUTER_HTTP" "$ROUTER_1P"; do
	wait_for "the gateway's registration at $r" sh -c "curl -sf ${curl_tls[*]} $cs://$r/v1/stargate/backends | grep -q '\"state\":\"ready\"'"
done

mkdir -p "$work/nginx"
cat >"$work/nginx.conf" <<CONF
daemon off;
master_process on;
worker_processes $workers;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    upstream engine {
        server $ENGINE;
        keepalive 512;
    }
    server {
        listen $NGINX$([ "$TLS" = 1 ] && echo " ssl");
$([ "$TLS" = 1 ] && printf '        ssl_certificate %s;\n        ssl_certificate_key %s;\n        ssl_protocols TLSv1.2 TLSv1.3;\n' "$work/tls.pem" "$work/tls-key.pem")
        location / {
            proxy_pass http://engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
CONF
start nginx "${proxy[@]}" "$nginx_bin" -p "$work/nginx" -e "$work/nginx-error.log" -c "$work/nginx.conf"
nginx_master=${pids[-1]}
wait_for nginx curl -sf "${curl_tls[@]}" -o /dev/null "$cs://$NGINX/health"
nginx_pids=$(echo "$nginx_master" $(pgrep -P "$nginx_master") | tr ' ' ',')

declare -A target_url=([engine]="http://$ENGINE" [stargate]="$cs://$ROUTER" [stargate-1proc]="$cs://$ROUTER_1P"
	[stargate-http]="$cs://$ROUTER_HTTP" [nginx]="$cs://$NGINX")
declare -A target_pids=([engine]="$engine_pid" [stargate]="$router_pid,$gateway_pid" [stargate-1proc]="$router_1p_pid"
	[stargate-http]="$router_http_pid,$gateway_http_pid" [nginx]="$nginx_pids")

measure() { # measure FILE THINK REP TARGET
	"${client[@]}" "$work/proxyload" run --url "${target_url[$4]}" --pids "${target_pids[$4]}" --engine-pid "$engine_pid" \
		--label "$4" --rep "$3" --streams "$STREAMS" --warmup "$WARMUP" --duration "$DURATION" \
		--max-tokens "$MAX_TOKENS" --think "$2" "${load_tls[@]}" >>"$1"
}

modes=(saturated)
[ "$THINK" != 0 ] && modes+=(paced)
for mode in "${modes[@]}"; do
	think=0
	[ "$mode" = paced ] && think=$THINK
	: >"$OUT/$mode.ndjson"
	echo "== $mode (think $think)" >&2
	for rep in $(seq "$REPS"); do
		for t in $TARGETS; do
			measure "$OUT/$mode.ndjson" "$think" "$rep" "$t"
		done
	done
done

if [ "$PROFILE" = 1 ]; then
	echo "== CPU profiles of router and gateway under saturating load" >&2
	secs=$(( ${DURATION%s} ))
	curl -sf -o "$OUT/router.pprof" "http://$RT_PPROF/debug/pprof/profile?seconds=$secs" &
	p1=$!
	curl -sf -o "$OUT/gateway.pprof" "http://$GW_PPROF/debug/pprof/profile?seconds=$secs" &
	p2=$!
	"${client[@]}" "$work/proxyload" run --url "$cs://$ROUTER" "${load_tls[@]}" --pids "$router_pid,$gateway_pid" --engine-pid "$engine_pid" \
		--label stargate-profiled --streams "$STREAMS" --warmup 0s --duration "$DURATION" --max-tokens "$MAX_TOKENS" >"$OUT/profiled.ndjson"
	wait "$p1" "$p2"
	curl -sf -o "$OUT/router-allocs.pprof" "http://$RT_PPROF/debug/pprof/allocs"
	curl -sf -o "$OUT/gateway-allocs.pprof" "http://$GW_PPROF/debug/pprof/allocs"
	for s in router gateway; do
		go tool pprof -top -nodecount=25 "$work/stargate" "$OUT/$s.pprof" >"$OUT/$s-top.txt" 2>/dev/null
		go tool pprof -top -cum -nodecount=40 "$work/stargate" "$OUT/$s.pprof" >"$OUT/$s-cum.txt" 2>/dev/null
		go tool pprof -top -sample_index=alloc_space -nodecount=25 "$work/stargate" "$OUT/$s-allocs.pprof" >"$OUT/$s-allocs.txt" 2>/dev/null
	done
	cp "$work/stargate" "$OUT/stargate.bin"
fi

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt" >&2
echo
cat "$OUT/machine.txt"
for mode in "${modes[@]}"; do
	echo
	echo "$mode: $STREAMS streams, think $([ "$mode" = paced ] && echo "$THINK" || echo 0), medians of $REPS runs; added = minus the engine called directly in the same repetition"
	"$work/proxyload" table "$OUT/$mode.ndjson" | tee "$OUT/$mode.txt"
	"$work/proxyload" table --markdown "$OUT/$mode.ndjson" >"$OUT/$mode.md"
done
