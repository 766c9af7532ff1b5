#!/usr/bin/env bash
# Runs a command against a fresh redis-server of its own: installs redis-server (Debian package)
# if it is missing, starts one on 127.0.0.1 on a free port with no persistence, exports
# TOLLGATE_REDIS_URL (and TOLLGATE_REDIS_SERVER, the binary, for the tests that start, kill and
# restart servers of their own), runs the command, and shuts the server down whatever happens.
#
#   bash .ci/redis.sh                      # the Redis test suite
#   bash .ci/redis.sh cargo bench --features redis --bench redis
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir"
cleanup() {
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
redis-cli -p "$port" ping >/dev/null

export TOLLGATE_REDIS_URL="redis://127.0.0.1:$port/"
export TOLLGATE_REDIS_SERVER="$(command -v redis-server)"
echo "redis-server $(redis-server --version | awk '{print $3}') on $TOLLGATE_REDIS_URL"
if [ "$#" -eq 0 ]; then
  set -- cargo test --features redis --test redis -- --test-threads=2
fi
"$@"
