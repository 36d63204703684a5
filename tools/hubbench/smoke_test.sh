#!/usr/bin/env bash
# Proves the harness works: starts noop_server and runs every hubbench
# workload against it briefly; each must print an "ok" result with traffic.
#   smoke_test.sh NOOP_SERVER HUBBENCH
set -euo pipefail
noop_server="$1"
hubbench="$2"
dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/smoke.XXXXXX")"

"$noop_server" --listen=127.0.0.1:0 >"$dir/out" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  grep -q "serving on" "$dir/out" && break
  sleep 0.1
done
addr="$(sed -n 's/.*serving on \([^ ]*\).*/\1/p' "$dir/out")"
[[ -n "$addr" ]] || { echo "noop_server did not start"; exit 1; }

failed=0
check() {  # check FIELD WORKLOAD FLAGS...: the result is ok and FIELD > 0.
  local field="$1" line
  shift
  line="$("$hubbench" "$@" --target=noop --addr="$addr" --duration=1s \
    --warmup=200ms --server_pid="$pid")"
  echo "$line"
  if [[ "$line" != *'"status":"ok"'* ]] ||
    ! [[ "$line" =~ \"$field\":([0-9.]+) ]] ||
    [[ "${BASH_REMATCH[1]}" == "0.0" || "${BASH_REMATCH[1]}" == "0" ]]; then
    echo "FAILED: hubbench $* (want status ok and $field > 0)"
    failed=1
  fi
}
check ops_per_s register --clients=4
check server_switches_per_op register --clients=4
check ops_per_s heartbeat --streams=8 --connections=4
check ops_per_s cas --clients=2 --keys=one
check rss_kib idle --streams=200 --connections=8 --settle=200ms

# A usage error is reported, not run.
if "$hubbench" nosuchworkload --addr="$addr" 2>/dev/null; then
  echo "FAILED: an unknown workload was accepted"
  failed=1
fi

# SIGTERM stops the server cleanly.
kill -TERM "$pid"
if ! wait "$pid"; then
  echo "FAILED: noop_server did not exit 0 on SIGTERM"
  failed=1
fi
exit "$failed"
