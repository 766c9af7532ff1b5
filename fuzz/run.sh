#!/usr/bin/env bash
# Runs every fuzz target for a fixed time, starting from its checked-in seed corpus.
#
#   fuzz/run.sh                 # 60 s per target (15 targets: about 15 minutes plus the build)
#   FUZZ_SECONDS=600 fuzz/run.sh
#   FUZZ_TARGETS="token_bucket sliding_window" fuzz/run.sh
#
# Needs the nightly toolchain (libFuzzer instrumentation) and cargo-fuzz, which it installs from
# crates.io if missing. New inputs go to a scratch directory, so fuzz/corpus/ keeps only the
# hand-made seeds. A difference between a limiter and its model, or a panic, stops that target
# with a non-zero status; the input is saved under fuzz/artifacts/<target>/ and the panic message
# shows the step-by-step trace. Replay one with:
#   cargo +nightly fuzz run -s none <target> fuzz/artifacts/<target>/<file>
set -euo pipefail
cd "$(dirname "$0")"

secs="${FUZZ_SECONDS:-60}"
targets=(${FUZZ_TARGETS:-options concurrency token_bucket fixed_window sliding_window waiting sliding_window_moving gcra leaky_meter leaky_shaper sliding_counter sliding_log late_service keyed settle})

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: the nightly toolchain is required (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# Replay the seeds (including the known-issue reproducers) on stable first: quick and exact.
cargo test --quiet

# Safe Rust: no sanitizer, but debug assertions and overflow checks stay on (cargo-fuzz default).
flags=(-s none)
cargo +nightly fuzz build "${flags[@]}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
passed=0
failed=0
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t"
    echo "=== fuzz $t for ${secs}s"
    start=$(date +%s)
    if cargo +nightly fuzz run "${flags[@]}" "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$scratch/$t.log" 2>&1; then
        passed=$((passed + 1))
        runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$scratch/$t.log" | grep -o '[0-9]*$' || echo '?')
        echo "ok: $t: $runs executions in $(($(date +%s) - start))s"
    else
        failed=$((failed + 1))
        echo "FAILED: $t (input saved under fuzz/artifacts/$t/)"
        grep -v -E '^\s+([0-9]+: |at )' "$scratch/$t.log" | tail -60
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
