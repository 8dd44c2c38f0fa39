#!/usr/bin/env bash
# Highest rate the in-process hetero fleet sustains on this machine at the
# live study's scale: for each nominal rate in RATES, start a fresh
# `stargate fleet --fleet hetero --scale 0.1`, drive it with `stargate drive`
# (the routing study's workload and client), profile the fleet's CPU during
# the measured window, and print one line per rate. See BENCHMARKS.md.
#
#   bench/fleet.sh                         # RATES="40 55 70", about 13 minutes
#   RATES="45 50" WARMUP=240s MEASURE=120s bench/fleet.sh
#
# Settings (environment): RATES, WARMUP=180s, MEASURE=60s, SCALE=0.1,
# POLICY=pulsar-waw, SEED=1, OUT=out/bench-fleet. Sessions last minutes, so a
# warm-up much shorter than 180 s measures a fleet whose offered load is still
# well below the nominal rate's steady state.
set -euo pipefail

RATES=${RATES:-40 55 70}
WARMUP=${WARMUP:-180s}
MEASURE=${MEASURE:-60s}
SCALE=${SCALE:-0.1}
POLICY=${POLICY:-pulsar-waw}
SEED=${SEED:-1}
PPROF=127.0.0.1:18301

cd "$(dirname "$0")/.."
OUT=${OUT:-out/bench-fleet}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/stargate-fleet.XXXXXX)
fleet_pid= drive_pid= prof=
cleanup() {
	for p in $prof $drive_pid $fleet_pid; do kill "$p" 2>/dev/null || true; done
	for p in $prof $drive_pid $fleet_pid; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$work/stargate" ./cmd/stargate
cp "$work/stargate" "$OUT/stargate.bin"

cpu() { # cpu PID: utime+stime in clock ticks
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

{
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)')"
	echo "settings: fleet hetero, scale $SCALE, policy $POLICY, seed $SEED, warm-up $WARMUP, measured $MEASURE"
} | tee "$OUT/machine.txt" >&2

secs() { local d=$1; d=${d%s}; echo "$d"; }
hdr="rps offered goodput slo% reuse% ttft_p50_s ttft_p99_s turns failures rejections fleet_cores drive_cores load1_before load1_after"
echo "$hdr" >"$OUT/rates.txt"
for rps in $RATES; do
	dir="$OUT/rps-$rps"
	mkdir -p "$dir"
	"$work/stargate" fleet --fleet hetero --scale "$SCALE" --policy "$POLICY" --seed "$SEED" --pprof "$PPROF" \
		>"$work/urls" 2>"$dir/fleet.log" &
	fleet_pid=$!
	for _ in $(seq 300); do
		[ -s "$work/urls" ] && break
		sleep 0.1
	done
	urls=$(head -n1 "$work/urls")
	[ -n "$urls" ] || { echo "the fleet did not start:" >&2; cat "$dir/fleet.log" >&2; exit 1; }
	load0=$(cut -d' ' -f1 /proc/loadavg)
	echo "== $rps req/s: $(tail -n1 "$dir/fleet.log"); load $load0" >&2
	# Profile the fleet over the measured window.
	( sleep "$(secs "$WARMUP")"; curl -sf -o "$dir/fleet.pprof" "http://$PPROF/debug/pprof/profile?seconds=$(secs "$MEASURE")" ) &
	prof=$!
	f0=$(cpu "$fleet_pid")
	"$work/stargate" drive --target "$urls" --fleet hetero --rps "$rps" --seed "$SEED" \
		--warmup "$WARMUP" --measure "$MEASURE" --out "$dir" >"$dir/summary.txt" 2>"$dir/drive.log" &
	drive_pid=$!
	# CPU over the measured window but its last 2 s (the driver exits at its end).
	sleep "$(secs "$WARMUP")"
	f1=$(cpu "$fleet_pid") d1=$(cpu "$drive_pid")
	m=$(( $(secs "$MEASURE") - 2 ))
	sleep "$m"
	f2=$(cpu "$fleet_pid") d2=$(cpu "$drive_pid")
	wait "$drive_pid"
	drive_pid=
	wait "$prof" || true
	prof=
	load1=$(cut -d' ' -f1 /proc/loadavg)
	kill "$fleet_pid"
	wait "$fleet_pid" 2>/dev/null || true
	fleet_pid=
	jq -r --arg rps "$rps" --arg fc "$(echo "($f2 - $f1) / 100 / $m" | bc -l)" --arg dc "$(echo "($d2 - $d1) / 100 / $m" | bc -l)" \
		--arg l0 "$load0" --arg l1 "$load1" \
		'[$rps, (.offered_rps*100|round/100), (.goodput_rps*100|round/100), (.slo_pct*10|round/10), (.reuse_pct*10|round/10),
		  (.ttft_p50_s*1000|round/1000), (.ttft_p99_s*1000|round/1000), .turns, .failures, .rejections,
		  (($fc|tonumber)*100|round/100), (($dc|tonumber)*100|round/100), $l0, $l1] | @tsv' "$dir/summary.json" | tr '\t' ' ' >>"$OUT/rates.txt"
	tail -n1 "$OUT/rates.txt" >&2
	go tool pprof -top -nodecount=30 "$work/stargate" "$dir/fleet.pprof" >"$dir/fleet-top.txt" 2>/dev/null || true
	go tool pprof -top -cum -nodecount=60 "$work/stargate" "$dir/fleet.pprof" >"$dir/fleet-cum.txt" 2>/dev/null || true
done
echo
cat "$OUT/machine.txt"
column -t "$OUT/rates.txt"
