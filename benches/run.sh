#!/bin/sh
# Reproduces benches/RESULTS.md.
#
#   CARGO_TARGET_DIR=target/bench RUNS=3 ROUNDS=5 nice -n -20 sh benches/run.sh > /tmp/tables.md
#
# 1. RUNS full runs of the criterion benchmarks (each kept in $TARGET/criterion-runN); the tables
#    keep each benchmark's lowest median over the runs (interference only ever adds time).
# 2. ROUNDS paired rounds of the benchmarks the issue's targets compare (kept in
#    $TARGET/criterion-pairN), short, so that the two sides of each ratio run within about a
#    minute of each other; the targets table takes each ratio within a round.
# 3. One run of the instruction counts (needs valgrind and
#    `cargo install iai-callgrind-runner --version 0.16.1`).
set -e
T=${CARGO_TARGET_DIR:-target}
RUNS=${RUNS:-3}
ROUNDS=${ROUNDS:-5}
TARGETS='^(floor/(manual|std|coarse)\+cas(64|128)'
TARGETS="$TARGETS|st/(token_bucket|fixed_window|sliding_window|governor)/allowed/(manual|std|coarse)"
TARGETS="$TARGETS|st/concurrency/acquire\+release(-held)?/(manual|std|coarse)"
TARGETS="$TARGETS|st/tokio_semaphore/acquire\+release"
TARGETS="$TARGETS|mt2/(token_bucket|fixed_window|sliding_window|governor)/allowed/(manual|coarse))\$"
rm -rf "$T"/criterion-run* "$T"/criterion-pair*
i=1
while [ "$i" -le "$RUNS" ]; do
    cargo bench --bench throughput >&2
    cp -r "$T/criterion" "$T/criterion-run$i"
    i=$((i + 1))
done
i=1
while [ "$i" -le "$ROUNDS" ]; do
    rm -rf "$T/criterion"
    cargo bench --bench throughput -- --warm-up-time 0.3 --measurement-time 1 "$TARGETS" >&2
    cp -r "$T/criterion" "$T/criterion-pair$i"
    i=$((i + 1))
done
cargo bench --bench instructions >&2
python3 "$(dirname "$0")/report.py" --iai "$T/iai" --pairs "$T"/criterion-pair* -- "$T"/criterion-run*
