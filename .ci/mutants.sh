#!/usr/bin/env bash
# Mutation testing of the pure cores with cargo-mutants: every mutant of the state modules and
# the CAS loop must be caught by the library's unit tests or by the fuzz seed replay (the
# differential harness run over fuzz/corpus on stable, plus a few hundred pseudo-random
# waiting scenarios). Survivors that cannot be caught because they are equivalent are listed,
# with the reason, in fuzz/MUTANTS.md; this script fails on any other survivor.
#
#   .ci/mutants.sh                                    # all five files (see fuzz/MUTANTS.md for the time)
#   MUTANTS_FILES="src/ticks.rs src/cas.rs" .ci/mutants.sh
#
# Two passes, because the two test commands differ a hundredfold in cost:
#   1. every mutant against `cargo test --lib` (an incremental rebuild of ~1-5 s, 0.1 s of
#      tests), MUTANTS_JOBS scratch trees in parallel (default 2), each with its OWN target
#      directory — a shared one makes a mutant's tests wait on the cargo lock while another
#      mutant builds, which cargo-mutants then reports as a false timeout;
#   2. only the survivors of pass 1, against the unit tests plus the fuzz seed replay.
# Results: $MUTANTS_OUT/pass1/mutants.out and $MUTANTS_OUT/pass2/mutants.out
# ({caught,missed,unviable,timeout}.txt). A timeout is a mutant that made a test hang (most
# often a threaded waiting test whose waiter time never serves): detected, by a hang.
set -euo pipefail
cd "$(dirname "$0")/.."

files=(${MUTANTS_FILES:-src/bucket/state.rs src/concurrency/state.rs src/sliding_window/state.rs src/ticks.rs src/cas.rs})
jobs="${MUTANTS_JOBS:-2}"
out="${MUTANTS_OUT:-$PWD/target/mutants}"
timeout="${MUTANTS_TIMEOUT:-20}"

if ! command -v cargo-mutants >/dev/null 2>&1; then
    cargo install cargo-mutants --locked
fi
# Debug info is not needed to run tests, and linking without it is much faster.
export CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_TEST_DEBUG=0
unset CARGO_TARGET_DIR

file_args=()
for f in "${files[@]}"; do
    file_args+=(--file "$f")
done
common=(--no-shuffle --jobs "$jobs" --test-tool cargo --timeout "$timeout" --build-timeout 600)

echo "--- pass 1: unit tests"
status=0
cargo-mutants mutants "${common[@]}" --baseline run --output "$out/pass1" "${file_args[@]}" \
    -- --lib || status=$?
case "$status" in 0 | 2 | 3) ;; *) echo "cargo-mutants failed (exit $status)"; exit "$status" ;; esac
p1="$out/pass1/mutants.out"

final="$p1"
if [ -s "$p1/missed.txt" ]; then
    echo "--- pass 2: the $(wc -l <"$p1/missed.txt") survivors, with the fuzz seed replay"
    real_cargo="$(command -v cargo)"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    cat >"$work/cargo" <<EOF
#!/usr/bin/env bash
# cargo, plus the fuzz seed replay after every full \`cargo test\` (not \`--no-run\` builds).
set -e
"$real_cargo" "\$@"
if [ "\${1:-}" = test ] && ! printf '%s\n' "\$@" | grep -qx -- --no-run; then
    cd fuzz
    TOLLGATE_FUZZ_RANDOM="\${TOLLGATE_FUZZ_RANDOM:-300}" "$real_cargo" test --quiet --test replay --test random
fi
EOF
    chmod +x "$work/cargo"
    # One exact-name filter per survivor (their descriptions as cargo-mutants prints them).
    re=()
    while IFS= read -r m; do
        name="${m#*: }"
        re+=(--re "$(printf '%s' "$name" | sed -e 's/[][\.*^$()+?{}|]/\\&/g')")
    done <"$p1/missed.txt"
    status=0
    # Called as `cargo-mutants mutants`, not `cargo mutants`: cargo would set $CARGO to itself.
    CARGO="$work/cargo" cargo-mutants mutants "${common[@]}" --jobs 1 --baseline skip \
        --output "$out/pass2" "${file_args[@]}" "${re[@]}" -- --lib || status=$?
    case "$status" in 0 | 2 | 3) ;; *) echo "cargo-mutants failed (exit $status)"; exit "$status" ;; esac
    final="$out/pass2/mutants.out"
fi

echo "--- summary (pass 1)"
for k in caught missed unviable timeout; do
    printf '%-9s %s\n' "$k" "$(wc -l <"$p1/$k.txt" 2>/dev/null || echo 0)"
done

# Survivors listed as equivalent in fuzz/MUTANTS.md (one "- `file: description`" each) are
# accepted; any other fails the run.
unexpected=0
if [ -s "$final/missed.txt" ]; then
    while IFS= read -r m; do
        key="$(printf '%s' "$m" | sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /')"
        if grep -qF -- "$key" fuzz/MUTANTS.md; then
            echo "equivalent (fuzz/MUTANTS.md): $m"
        else
            echo "MISSED: $m"
            unexpected=$((unexpected + 1))
        fi
    done <"$final/missed.txt"
fi
[ "$unexpected" -eq 0 ]
