#!/usr/bin/env bash
# Router replica at scale: one live `stargate router` (pulsar-waw, signed
# stats, xDS on) with GATEWAYS gateways' worth of stats senders reporting
# every INTERVAL over loopback (cmd/statsload), and requests routed through
# it meanwhile. Reports the router's CPU per stats message, its memory and
# the routed requests' latency. See BENCHMARKS.md.
#
#   bench/router-scale.sh                         # 1,000 gateways every 500 ms
#   GATEWAYS=2000 INTERVAL=250ms bench/router-scale.sh
#
# Settings (environment): GATEWAYS=1000 INTERVAL=500ms WARMUP=15s MEASURE=30s
# RPS=50 POLICY=pulsar-waw PROFILE=0 (1: CPU profile of the router over the
# window) OUT=out/bench-router-scale PORT=18300 (router), PORT+1 (xDS),
# PORT+2 (pprof). Everything listens on 127.0.0.1; all processes stop at exit.
set -euo pipefail

GATEWAYS=${GATEWAYS:-1000}
INTERVAL=${INTERVAL:-500ms}
WARMUP=${WARMUP:-15s}
MEASURE=${MEASURE:-30s}
RPS=${RPS:-50}
POLICY=${POLICY:-pulsar-waw}
PROFILE=${PROFILE:-0}
OUT=${OUT:-out/bench-router-scale}
PORT=${PORT:-18300}

cd "$(dirname "$0")/.."
mkdir -p "$OUT"
go build -o "$OUT/stargate" ./cmd/stargate
go build -o "$OUT/statsload" ./cmd/statsload
key() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
{
	echo "gateway gw-key $(key)"
	echo "router rt-key $(key)"
	echo "operator op-key $(key)"
} >"$OUT/keys.txt"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

args=(router --listen "127.0.0.1:$PORT" --policy "$POLICY" --hmac-key-file "$OUT/keys.txt" --xds-listen "127.0.0.1:$((PORT + 1))")
if [ "$PROFILE" = 1 ]; then
	args+=(--pprof "127.0.0.1:$((PORT + 2))")
fi
"$OUT/stargate" "${args[@]}" 2>"$OUT/router.log" &
router=$!
pids+=("$router")
for _ in $(seq 100); do
	curl -fs "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
	sleep 0.1
done

if [ "$PROFILE" = 1 ]; then
	secs=$(($(echo "$MEASURE" | tr -dc 0-9) - 2))
	(sleep "$(echo "$WARMUP" | tr -dc 0-9)" && curl -fs "http://127.0.0.1:$((PORT + 2))/debug/pprof/profile?seconds=$secs" -o "$OUT/router.pprof") &
	pids+=($!)
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/run.txt"
"$OUT/statsload" --router "http://127.0.0.1:$PORT" --router-pid "$router" --hmac-key-file "$OUT/keys.txt" \
	--gateways "$GATEWAYS" --interval "$INTERVAL" --warmup "$WARMUP" --measure "$MEASURE" --rps "$RPS" --json >"$OUT/result.json"
cat "$OUT/result.json" | tee -a "$OUT/run.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.txt"
if [ "$PROFILE" = 1 ]; then
	wait "${pids[-1]}" || true
	go tool pprof -top -nodecount=40 "$OUT/stargate" "$OUT/router.pprof" >"$OUT/router-top.txt" 2>/dev/null || true
	go tool pprof -top -cum -nodecount=60 "$OUT/stargate" "$OUT/router.pprof" >"$OUT/router-cum.txt" 2>/dev/null || true
fi
