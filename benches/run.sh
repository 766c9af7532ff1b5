#!/bin/sh
# Reproduces benches/RESULTS.md.
#
#   CARGO_TARGET_DIR=target/bench RUNS=0 ROUNDS=2 nice -n -20 sh benches/run.sh > /tmp/tables.md
#
# 1. RUNS full runs of the criterion benchmarks (each kept in $TARGET/criterion-runN; about 6
#    minutes each here; 0 skips them); the tables keep each benchmark's lowest median over the
#    runs (interference only ever adds time).
# 2. ROUNDS short paired rounds of only the benchmarks the targets compare (issue 35's; kept in
#    $TARGET/criterion-pairN; about a minute each), so that the two sides of each ratio run within
#    a minute of each other; the targets table takes each ratio within a round.
# 3. One run of the instruction counts (needs valgrind and
#    `cargo install iai-callgrind-runner --version 0.16.1`).
set -e
T=${CARGO_TARGET_DIR:-target}
RUNS=${RUNS:-0}
ROUNDS=${ROUNDS:-2}
WARM=${WARM:-0.2}
MEASURE=${MEASURE:-0.6}
TARGETS='^(floor/sub\+add|st/(token_bucket|fixed_window|governor)/(allowed|denied)/(manual|std|coarse)'
TARGETS="$TARGETS|st/sliding_window/allowed/(manual|std|coarse)"
TARGETS="$TARGETS|st/concurrency/(acquire\+release(-held)?|denied)/(manual|std|coarse)"
TARGETS="$TARGETS|st/tokio_semaphore/(acquire\+release|denied)"
TARGETS="$TARGETS|mt2/(token_bucket|fixed_window|governor)/(allowed|denied)/(manual|coarse))\$"
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
    cargo bench --bench throughput -- --warm-up-time "$WARM" --measurement-time "$MEASURE" \
        "$TARGETS" >&2
    cp -r "$T/criterion" "$T/criterion-pair$i"
    i=$((i + 1))
done
cargo bench --bench instructions >&2
if [ "$RUNS" -gt 0 ]; then
    python3 "$(dirname "$0")/report.py" --iai "$T/iai" --pairs "$T"/criterion-pair* -- "$T"/criterion-run*
else
    python3 "$(dirname "$0")/report.py" --iai "$T/iai" --pairs "$T"/criterion-pair* -- "$T"/criterion-pair*
fi
