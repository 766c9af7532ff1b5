#!/usr/bin/env bash
# Code size on a Cortex-M4F (thumbv7em-none-eabihf, opt-level "s", LTO, panic=abort): builds the
# no_std probe in benches/size-probe, adds up the code each entry point reaches (calls, vtables,
# literal pools followed transitively) and checks the firmware budgets and that portable-atomic's
# global lock fallback (a spin lock an interrupt handler can deadlock on) is not linked in. Then
# builds the whole programs of benches/firmware-size (a limiter built, called with a count read
# at run time, its lease dropped) and checks what each image pays against its ceiling
# (benches/programs.py: fails above it, or if `memcpy` is linked).
#
#   bash benches/size.sh          # prints the table; exits 1 if the lock table is linked in
#   SIZE_STRICT=1 bash benches/size.sh  # also exits 1 if a code-size budget is exceeded
#   VERBOSE=1 bash benches/size.sh  # also lists the largest functions of each entry point
set -euo pipefail
cd "$(dirname "$0")/size-probe"
target=thumbv7em-none-eabihf
rustup target add "$target" >/dev/null 2>&1 || true
rustup component add llvm-tools >/dev/null 2>&1 || true
cargo build --quiet --release --target "$target"
bin="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
extra=()
[ -n "${VERBOSE:-}" ] && extra+=(-v=1)
python3 ../size.py "$bin" "target/$target/release/libtollgate_size_probe.a" \
  probe_token_bucket_try_acquire=1024 probe_token_bucket_no_queue_try_acquire=1024 \
  probe_concurrency_acquire_release=512 probe_concurrency_no_queue_acquire_release=512 \
  "${extra[@]}"

# Whole programs (benches/firmware-size): what an image pays for each queueless limiter, its
# constructor and a run-time count included; fails above a ceiling or if `memcpy` is linked.
cd ../firmware-size
cargo build --quiet --release
python3 ../programs.py "$bin" "target/$target/release"
