#!/usr/bin/env bash
# Simulated requests per CPU second and per wall second of `stargate sim`,
# BLIS and the Fleet Sim tool on the routing study's hetero fleet (220 GPUs,
# 450 req/s) and its 10x and 100x copies, each on one core, on this machine.
# See BENCHMARKS.md, "The simulator beside BLIS and the Fleet Sim tool" for what each tool models and the figures.
#
#   bench/peers.sh BLIS_CHECKOUT FLEET_SIM_CHECKOUT
#   bench/peers.sh ~/src/inference-sim ~/src/semantic-router     # the repository or its src/fleet-sim
#   bench/peers.sh - ~/src/semantic-router                       # "-" skips a tool
#   SCALES="1 10 100" WINDOW_S_100=60 bench/peers.sh ...
#
# The checkouts are local directories (clones of inference-sim/inference-sim
# and of vllm-project/semantic-router); nothing is downloaded but BLIS's Go
# modules. The Fleet Sim tool needs Python 3.10+ with numpy and scipy (on
# Debian: apt-get install python3-numpy python3-scipy).
#
# Settings (environment):
#   SCALES="1 10"      fleet copies to run (1, 10 or 100; 100 for Stargate only unless PEERS_100X=1)
#   WINDOW_S=480       simulated seconds per run (Stargate: half warm-up, half measured;
#                      BLIS: its horizon; the Fleet Sim tool: rate x WINDOW_S requests)
#   WINDOW_S_<scale>   the same for one scale (e.g. WINDOW_S_100=60)
#   STARGATE_WINDOW_S_<scale>, BLIS_WINDOW_S_<scale>, FS_WINDOW_S_<scale>
#                      the same for one tool and scale
#   BLIS_MODEL=meta-llama/llama-3.1-8b-instruct  BLIS_HARDWARE=H100  (cached model config, no network)
#   BLIS_ROUTING=weighted   (BLIS's default scorers: precise-prefix-cache:2,queue-depth:1,kv-utilization:1)
#   PYTHON             an interpreter with numpy and scipy (default: the first of python3, /usr/bin/python3)
#   OUT=out/bench-peers
# Every run is under `nice -n 15`, Go runs with GOMAXPROCS=1 and Python
# pinned to one core (taskset -c 0); /usr/bin/time -v gives CPU and peak RSS.
set -euo pipefail

usage() {
	sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
die() {
	echo "bench/peers.sh: $*" >&2
	exit 1
}

[ $# -eq 2 ] || usage
blis_dir=$1 fs_dir=$2

# A checkout must exist and look like the tool's sources.
if [ "$blis_dir" != - ]; then
	[ -d "$blis_dir" ] || die "BLIS checkout $blis_dir: no such directory (clone inference-sim/inference-sim and pass its path, or - to skip BLIS)"
	grep -q '^module github.com/inference-sim/inference-sim' "$blis_dir/go.mod" 2>/dev/null ||
		die "BLIS checkout $blis_dir: no go.mod of module github.com/inference-sim/inference-sim (pass the root of a clone of inference-sim/inference-sim)"
	blis_dir=$(cd "$blis_dir" && pwd)
fi
if [ "$fs_dir" != - ]; then
	[ -d "$fs_dir" ] || die "Fleet Sim checkout $fs_dir: no such directory (clone vllm-project/semantic-router and pass its path, or - to skip the Fleet Sim tool)"
	if [ ! -f "$fs_dir/run_sim.py" ] && [ -f "$fs_dir/src/fleet-sim/run_sim.py" ]; then
		fs_dir=$fs_dir/src/fleet-sim
	fi
	[ -f "$fs_dir/run_sim.py" ] && [ -d "$fs_dir/fleet_sim" ] ||
		die "Fleet Sim checkout $fs_dir: no run_sim.py and fleet_sim/ there or in src/fleet-sim (pass a clone of vllm-project/semantic-router)"
	fs_dir=$(cd "$fs_dir" && pwd)
fi
for tool in jq /usr/bin/time go; do
	command -v "$tool" >/dev/null || die "$tool is needed and not installed"
done
if [ "$fs_dir" != - ]; then
	command -v taskset >/dev/null || die "taskset is needed (util-linux) to hold the Fleet Sim tool to one core"
	py=
	for cand in ${PYTHON:-} python3 /usr/bin/python3; do
		if command -v "$cand" >/dev/null && "$cand" -c 'import numpy, scipy' 2>/dev/null; then
			py=$(command -v "$cand")
			break
		fi
	done
	[ -n "$py" ] || die "no Python with numpy and scipy for the Fleet Sim tool (Debian: apt-get install python3-numpy python3-scipy; or set PYTHON)"
fi

SCALES=${SCALES:-1 10}
WINDOW_S=${WINDOW_S:-480}
BLIS_MODEL=${BLIS_MODEL:-meta-llama/llama-3.1-8b-instruct}
BLIS_HARDWARE=${BLIS_HARDWARE:-H100}
BLIS_ROUTING=${BLIS_ROUTING:-weighted}
for n in $SCALES; do
	case $n in 1 | 10 | 100) ;; *) die "SCALES: $n is not 1, 10 or 100 (examples/hetero-Nx.yaml)" ;; esac
done

cd "$(dirname "$0")/.."
root=$(pwd)
OUT=${OUT:-out/bench-peers}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
work=$(mktemp -d /tmp/stargate-peers.XXXXXX)
trap 'rm -rf "$work"' EXIT

# window TOOL SCALE: simulated seconds of one run.
window() {
	local v="${1}_WINDOW_S_$2" s="WINDOW_S_$2"
	echo "${!v:-${!s:-$WINDOW_S}}"
}

echo "== building" >&2
nice -n 15 go build -o "$work/stargate" ./cmd/stargate
if [ "$blis_dir" != - ]; then
	(cd "$blis_dir" && nice -n 15 go build -o "$work/blis" .)
fi

{
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
	echo "stargate: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)')"
	[ "$blis_dir" = - ] || echo "BLIS: $(git -C "$blis_dir" rev-parse HEAD 2>/dev/null || echo 'not a git checkout')"
	[ "$fs_dir" = - ] || echo "Fleet Sim: $(git -C "$fs_dir" rev-parse HEAD 2>/dev/null || echo 'not a git checkout'), $("$py" --version 2>&1), numpy $("$py" -c 'import numpy; print(numpy.__version__)'), scipy $("$py" -c 'import scipy; print(scipy.__version__)')"
} | tee "$OUT/machine.txt" >&2

# The hetero fleet's backends, GPUs each, from the fleet file.
gpus=$(grep -o 'gpus: [0-9]*' examples/hetero.yaml | awk '{print $2}')
[ "$(echo "$gpus" | awk '{s += $1} END {print s}')" = 220 ] || die "examples/hetero.yaml no longer has 220 GPUs; update bench/peers.sh"

# BLIS workload: the hetero fleet's sessions as closely as its workload
# spec allows (see BENCHMARKS.md, "The simulator beside BLIS and the Fleet Sim tool"): 22 turns a session (the mean of
# 5-40), sessions at rps/22 a second, user turns and outputs clamped normals
# with the uniform ranges' means and spreads, 5 s think time, each turn's
# prompt the whole conversation so far. No 4,000-token system prompt: a
# shared prefix sends every session to one instance under prefix routing.
blis_spec() { # blis_spec RPS
	cat <<EOF
version: "2"
seed: 1
category: reasoning
aggregate_rate: $(awk -v r="$1" 'BEGIN {printf "%.4f", r / 22}')
clients:
  - id: sessions
    rate_fraction: 1.0
    streaming: true
    arrival: {process: poisson}
    input_distribution:
      type: gaussian
      params: {mean: 1100, std_dev: 520, min: 200, max: 2000}
    output_distribution:
      type: gaussian
      params: {mean: 192, std_dev: 37, min: 128, max: 256}
    reasoning:
      reason_ratio_distribution: {type: constant, params: {value: 0}}
      multi_turn: {max_rounds: 22, think_time_us: 5000000, context_growth: accumulate}
EOF
}

# Fleet Sim fleet: one pool a backend (n copies of each), H100, least-loaded
# across pools; the tool's Azure CDF (single requests, no sessions).
fs_fleet() { # fs_fleet N
	echo "$gpus" | awk -v n="$1" '
		BEGIN { printf "{\"router\": \"least_loaded\", \"pools\": [" }
		{ for (k = 0; k < n; k++) { printf "%s{\"id\": \"b%d-%d\", \"gpu\": \"h100\", \"n_gpus\": %d, \"max_ctx\": 16384}", sep, NR, k, $1; sep = ", " } }
		END { print "]}" }'
}

secs() { # secs h:mm:ss.ss|m:ss.ss -> seconds
	echo "$1" | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }'
}
row() { # row TOOL SCALE REQUESTS TIMEFILE LOAD0 LOAD1 NOTE
	local user sys wall rss cpu
	user=$(awk -F': ' '/User time/ {print $2}' "$4")
	sys=$(awk -F': ' '/System time/ {print $2}' "$4")
	wall=$(secs "$(awk -F': ' '/Elapsed/ {print $2}' "$4")")
	rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$4")
	cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')
	awk -v t="$1" -v n="$2" -v r="$3" -v c="$cpu" -v w="$wall" -v m="$rss" -v l0="$5" -v l1="$6" -v note="$7" 'BEGIN {
		printf "| %s | %sx | %d | %.1f | %.1f | %.0f | %.0f | %.0f | %s-%s | %s |\n", t, n, r, c, w, r / c, r / w, m / 1024, l0, l1, note }' |
		tee -a "$OUT/table.md"
}
load() { cut -d' ' -f1 /proc/loadavg; }

echo "| tool | scale | requests | CPU s | wall s | req / CPU s | req / wall s | peak RSS MB | load (1 min) | run |" >"$OUT/table.md"
echo "|---|---|---|---|---|---|---|---|---|---|" >>"$OUT/table.md"
cat "$OUT/table.md" >&2

for n in $SCALES; do
	rps=$((450 * n))
	fleet=hetero
	[ "$n" = 1 ] || fleet=examples/hetero-${n}x.yaml

	w=$(window STARGATE "$n")
	half=$(awk -v w="$w" 'BEGIN {print w / 2}')
	dir="$OUT/stargate-${n}x" && mkdir -p "$dir"
	l0=$(load)
	GOMAXPROCS=1 nice -n 15 /usr/bin/time -v -o "$dir/time.txt" "$work/stargate" sim --fleet "$fleet" \
		--policy pulsar-waw --rps "$rps" --seed 1 --warmup "${half}s" --measure "${half}s" --format json >"$dir/out.json"
	req=$(jq '[.runs[0].backends[].gateway_received] | add' "$dir/out.json")
	row Stargate "$n" "$req" "$dir/time.txt" "$l0" "$(load)" "${half} s + ${half} s, pulsar-waw"

	if [ "$blis_dir" != - ] && { [ "$n" != 100 ] || [ "${PEERS_100X:-}" = 1 ]; }; then
		w=$(window BLIS "$n")
		dir="$OUT/blis-${n}x" && mkdir -p "$dir"
		blis_spec "$rps" >"$dir/workload.yaml"
		l0=$(load)
		(cd "$blis_dir" && GOMAXPROCS=1 nice -n 15 /usr/bin/time -v -o "$dir/time.txt" "$work/blis" run \
			--model "$BLIS_MODEL" --hardware "$BLIS_HARDWARE" --tp 1 --num-instances $((220 * n)) \
			--routing-policy "$BLIS_ROUTING" --workload-spec "$dir/workload.yaml" --seed 1 \
			--horizon $((w * 1000000)) >"$dir/out.txt" 2>"$dir/err.txt")
		req=$(grep -A5 '"instance_id": "cluster"' "$dir/out.txt" | awk -F'[:,]' '/injected_requests/ {print $2 + 0}')
		[ -n "$req" ] || die "BLIS ${n}x: no cluster injected_requests in $dir/out.txt"
		row BLIS "$n" "$req" "$dir/time.txt" "$l0" "$(load)" "horizon ${w} s, $BLIS_ROUTING"
	fi

	if [ "$fs_dir" != - ] && { [ "$n" != 100 ] || [ "${PEERS_100X:-}" = 1 ]; }; then
		w=$(window FS "$n")
		dir="$OUT/fleetsim-${n}x" && mkdir -p "$dir"
		fs_fleet "$n" >"$dir/fleet.json"
		nreq=$((rps * w))
		l0=$(load)
		(cd "$fs_dir" && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 15 taskset -c 0 \
			/usr/bin/time -v -o "$dir/time.txt" "$py" run_sim.py simulate-fleet "$dir/fleet.json" \
			--cdf data/azure_cdf.json --lam "$rps" --n-req "$nreq" --seed 1 --out "$dir/summary.json" >"$dir/out.txt")
		row "Fleet Sim" "$n" "$nreq" "$dir/time.txt" "$l0" "$(load)" "${w} s of arrivals, least_loaded"
	fi
done
echo "table: $OUT/table.md, raw outputs under $OUT" >&2
