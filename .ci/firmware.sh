#!/usr/bin/env bash
# Runs the firmware example (examples/firmware) in qemu-system-arm on the LM3S6965 (Cortex-M3):
# a SysTick handler and the main loop share a static token bucket and concurrency limiter. Each
# run must print PASS and exit 0 through semihosting; a hang is killed by the timeout and fails.
#
#   bash .ci/firmware.sh                    # the SysTick periods below, every firmware build
#   PERIODS="300" bash .ci/firmware.sh      # one period
set -euo pipefail
cd "$(dirname "$0")/../examples/firmware"
if ! command -v qemu-system-arm >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq qemu-system-arm >/dev/null
fi
rustup target add thumbv7m-none-eabi >/dev/null 2>&1 || true

periods=(${PERIODS:-200 400 1000 5000})
iterations="${ITERATIONS:-200000}"
# The firmware builds a user may pick: the default, and the crate's critical-section feature.
builds=("" "tollgate/critical-section")
status=0
for features in "${builds[@]}"; do
  for period in "${periods[@]}"; do
    echo "-- SysTick every $period cycles, features: ${features:-default}"
    FIRMWARE_SYSTICK_PERIOD="$period" FIRMWARE_ITERATIONS="$iterations" \
      cargo build --quiet --release ${features:+--features "$features"}
    elf=target/thumbv7m-none-eabi/release/tollgate-firmware
    if timeout 120 qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic \
        -semihosting-config enable=on,target=native -kernel "$elf" 2>&1 \
        | grep -v "^Timer with period zero" | tee /tmp/firmware.out; then
      grep -q '^PASS$' /tmp/firmware.out || { echo "   FAILED"; status=1; }
    else
      echo "   FAILED (exit status or timeout)"; status=1
    fi
  done
done
exit "$status"
