#!/usr/bin/env bash
# HTTP load benchmark in one run: plain axum vs axum + tollgate::http (`layer()`, and
# `layer().for_axum()`) vs axum + tower_governor,
# on the allowed path and on the rejected path (every limited mode keys by peer IP); then
# `for_axum` with one option on: shadow mode, a cost policy, an outcome policy
# (`charge_when`), the metrics with a Prometheus recorder, an `on_granted` hook (see
# benches/http_load/server.rs).
#
#   bash benches/http_load.sh [seconds per run (default 5)] [repetitions (default 3)]
#
# The server runs on one tokio worker pinned to CPU 0, wrk (Debian's `apt-get install -y wrk`)
# on CPU 1 with 1 thread and 50 connections. The modes are interleaved within each repetition,
# so that drift in the machine's load hits them alike; the report gives each mode's median
# requests/s and its ratio to plain axum (and, for the limited modes, tollgate / governor).
# Wall-time throughput on a shared machine is noisy: compare ratios within one run only.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS="${1:-5}"
REPS="${2:-3}"
PORT="${PORT:-3917}"
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
FEATURES="axum metrics"
cargo build --release --features "$FEATURES" --example http_load >/dev/null 2>&1 || cargo build --release --features "$FEATURES" --example http_load
BIN="${CARGO_TARGET_DIR:-target}/release/examples/http_load"
CPUS=$(nproc)
pin_server=(); pin_client=()
if [ "$CPUS" -ge 2 ] && command -v taskset >/dev/null; then
  pin_server=(taskset -c 0); pin_client=(taskset -c 1)
fi

MODES=(plain tollgate-allow tollgate-axum-allow governor-allow tollgate-reject tollgate-axum-reject governor-reject
  shadow-allow shadow-refuse cost-allow cost-reject outcome-allow outcome-reject metrics-allow metrics-reject hook-allow)
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

run_one() { # mode -> requests/s
  local mode=$1 pid rps
  "${pin_server[@]}" "$BIN" "$mode" "127.0.0.1:$PORT" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.05
  done
  # Check the path really is the one measured: 200 for allow/plain, 429 for reject.
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/" || true)
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/" || true)
  case "$mode" in
    *reject) [ "$code" = 429 ] || { echo "mode $mode answered $code, not 429" >&2; kill "$pid"; exit 1; } ;;
    *) [ "$code" = 200 ] || { echo "mode $mode answered $code, not 200" >&2; kill "$pid"; exit 1; } ;;
  esac
  rps=$("${pin_client[@]}" wrk -t1 -c50 -d"${SECS}s" "http://127.0.0.1:$PORT/" | awk '/Requests\/sec/ {print $2}')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$rps"
}

command -v curl >/dev/null || { apt-get install -y curl >/dev/null 2>&1 || true; }
for rep in $(seq "$REPS"); do
  for mode in "${MODES[@]}"; do
    r=$(run_one "$mode")
    echo "$r" >>"$OUT/$mode"
    printf 'rep %d  %-20s %10s req/s\n' "$rep" "$mode" "$r"
  done
done

median() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
echo "median of $REPS runs of ${SECS}s (wrk -t1 -c50, server 1 worker; load average: $(cut -d' ' -f1-3 /proc/loadavg))"
plain=$(median "$OUT/plain")
for mode in "${MODES[@]}"; do
  m=$(median "$OUT/$mode")
  case "$mode" in
    *reject) g=$(median "$OUT/governor-reject") ;;
    *) g=$(median "$OUT/governor-allow") ;;
  esac
  awk -v m="$m" -v p="$plain" -v g="$g" -v n="$mode" 'BEGIN {
    printf "%-20s %10.0f req/s  %6.3f x plain  %6.3f x governor (same path)\n", n, m, m/p, m/g
  }'
done
ga=$(median "$OUT/governor-allow"); gr=$(median "$OUT/governor-reject")
for t in tollgate tollgate-axum; do
  ta=$(median "$OUT/$t-allow"); tr=$(median "$OUT/$t-reject")
  awk -v t="$t" -v ta="$ta" -v ga="$ga" -v tr="$tr" -v gr="$gr" 'BEGIN {
    printf "%s / governor: allowed %.3f, rejected %.3f; its rejected / allowed: %.3f\n", t, ta/ga, tr/gr, tr/ta
  }'
done
