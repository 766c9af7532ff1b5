#!/usr/bin/env bash
# Mutation testing of the pure cores with cargo-mutants: every mutant of the state modules and
# the CAS loop must be caught by the library's unit tests or by the fuzz seed replay (the
# differential harness run over fuzz/corpus on stable, plus a few hundred pseudo-random
# waiting scenarios). Survivors that cannot be caught because they are equivalent are listed,
# with the reason, in fuzz/MUTANTS.md; this script fails on any other survivor. Results:
# target/mutants.out/{caught,missed,unviable,timeout}.txt.
#
#   .ci/mutants.sh                        # all five files (see fuzz/MUTANTS.md for the time)
#   MUTANTS_FILES="src/ticks.rs" .ci/mutants.sh
#   MUTANTS_JOBS=2 .ci/mutants.sh         # parallel scratch trees (more disk, more CPU)
#
# How the seed replay joins the test command: cargo-mutants runs `$CARGO test` in its scratch
# copy of the tree; $CARGO is pointed at a wrapper that runs the real `cargo test --lib` and then,
# in the copy's fuzz/ directory (a separate workspace that depends on the mutated library by
# path), `cargo test --test replay --test random`.
set -euo pipefail
cd "$(dirname "$0")/.."

files=(${MUTANTS_FILES:-src/bucket/state.rs src/concurrency/state.rs src/sliding_window/state.rs src/ticks.rs src/cas.rs})
jobs="${MUTANTS_JOBS:-1}"

if ! command -v cargo-mutants >/dev/null 2>&1; then
    cargo install cargo-mutants --locked
fi

real_cargo="$(command -v cargo)"
# Build in the tree's own target directories (not in each scratch copy): what is built already
# is reused, and later runs rebuild only the mutated crate.
root="$PWD"
export CARGO_TARGET_DIR="${MUTANTS_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/cargo" <<EOF
#!/usr/bin/env bash
# cargo, plus the fuzz seed replay after every full \`cargo test\` (not \`--no-run\` builds).
set -e
"$real_cargo" "\$@"
if [ "\${1:-}" = test ] && ! printf '%s\n' "\$@" | grep -qx -- --no-run; then
    cd fuzz
    CARGO_TARGET_DIR="$root/fuzz/target" TOLLGATE_FUZZ_RANDOM="\${TOLLGATE_FUZZ_RANDOM:-300}" "$real_cargo" test --quiet --test replay --test random
fi
EOF
chmod +x "$work/cargo"

outdir="${MUTANTS_OUT:-$root/target}"
# A mutant that breaks a waiter's wake-up makes a threaded test hang: cap each test run (the
# unmutated run takes ~80 s on a loaded 2-core machine); a timeout counts as detected.
args=(--no-shuffle --jobs "$jobs" --baseline "${MUTANTS_BASELINE:-run}" --output "$outdir"
    --test-tool cargo --timeout "${MUTANTS_TIMEOUT:-240}")
for f in "${files[@]}"; do
    args+=(--file "$f")
done

# Called as `cargo-mutants mutants`, not `cargo mutants`: cargo would set $CARGO to itself.
status=0
CARGO="$work/cargo" cargo-mutants mutants "${args[@]}" -- --lib || status=$?
out="$outdir/mutants.out"
echo "--- summary"
for k in caught missed unviable timeout; do
    printf '%-9s %s\n' "$k" "$(wc -l <"$out/$k.txt" 2>/dev/null || echo 0)"
done

# Survivors listed as equivalent in fuzz/MUTANTS.md (one "- `file:line:col: description`" each)
# are accepted; any other fails the run.
unexpected=0
if [ -s "$out/missed.txt" ]; then
    while IFS= read -r m; do
        key="$(printf '%s' "$m" | sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /')"
        if grep -qF -- "$key" fuzz/MUTANTS.md; then
            echo "equivalent (fuzz/MUTANTS.md): $m"
        else
            echo "MISSED: $m"
            unexpected=$((unexpected + 1))
        fi
    done <"$out/missed.txt"
fi
if [ -s "$out/timeout.txt" ]; then
    echo "timeouts:"
    cat "$out/timeout.txt"
fi
# cargo-mutants exits 2 when mutants are missed, 3 on timeouts; judge by the list instead.
case "$status" in
    0 | 2) ;;
    *) echo "cargo-mutants failed (exit $status)"; exit "$status" ;;
esac
[ "$unexpected" -eq 0 ]
