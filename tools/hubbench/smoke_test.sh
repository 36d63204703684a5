#!/usr/bin/env bash
# Proves the harness works: starts noop_server and runs every hubbench
# workload against it briefly, then the hub's own workloads against a hubd
# on SQLite; each must print an "ok" result with traffic.
#   smoke_test.sh NOOP_SERVER HUBBENCH HUBD JOBS
set -euo pipefail
noop_server="$1"
hubbench="$2"
hubd="$3"
jobs="$4"
dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/smoke.XXXXXX")"

"$noop_server" --listen=127.0.0.1:0 >"$dir/out" &
pid=$!
hubd_pid=""
trap 'kill -TERM "$pid" $hubd_pid 2>/dev/null || true; wait "$pid" $hubd_pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  grep -q "serving on" "$dir/out" && break
  sleep 0.1
done
addr="$(sed -n 's/.*serving on \([^ ]*\).*/\1/p' "$dir/out")"
[[ -n "$addr" ]] || { echo "noop_server did not start"; exit 1; }

failed=0
target=noop
server_pid="$pid"
# expect_ok FIELD LINE WHAT: LINE is an "ok" result with FIELD > 0.
expect_ok() {
  echo "$2"
  if [[ "$2" != *'"status":"ok"'* ]] ||
    ! [[ "$2" =~ \"$1\":([0-9.]+) ]] ||
    [[ "${BASH_REMATCH[1]}" == "0.0" || "${BASH_REMATCH[1]}" == "0" ]]; then
    echo "FAILED: $3 (want status ok and $1 > 0)"
    failed=1
  fi
}
check() {  # check FIELD WORKLOAD FLAGS...: the result is ok and FIELD > 0.
  local field="$1"
  shift
  last="$("$hubbench" "$@" --target="$target" --addr="$addr" --duration=1s \
    --warmup=200ms --server_pid="$server_pid")"
  expect_ok "$field" "$last" "hubbench $*"
}
check ops_per_s register --clients=4
check server_switches_per_op register --clients=4
check ops_per_s heartbeat --streams=8 --connections=4
check ops_per_s cas --clients=2 --keys=one
check rss_kib idle --streams=200 --connections=8 --settle=200ms

# A paced publish is hub's only: refused on the ceiling.
if "$hubbench" publish --target=noop --addr="$addr" --rate=10 2>/dev/null; then
  echo "FAILED: --rate was accepted for the noop target"
  failed=1
fi

# The hub's workloads against a real hubd (SQLite in this test's directory).
"$hubd" --listen=127.0.0.1:0 --db="$dir/hub.sqlite" >"$dir/hubd.out" 2>"$dir/hubd.err" &
hubd_pid=$!
for _ in $(seq 200); do
  grep -q "serving on" "$dir/hubd.out" 2>/dev/null && break
  kill -0 "$hubd_pid" 2>/dev/null || break
  sleep 0.1
done
hub_addr="$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$dir/hubd.out")"
[[ -n "$hub_addr" ]] || { echo "hubd did not start"; tail -5 "$dir/hubd.err"; exit 1; }
target=hub
addr="$hub_addr"
server_pid="$hubd_pid"
check ops_per_s register --clients=4
check ops_per_s cas --clients=2 --keys=distinct
check deliveries publish --clients=4 --to=agent
# Paced: 200 publishes/s for 1 s, the recipient attached through its own
# connection (--recipient_addr): about 200 in the window, none late.
check deliveries publish --clients=4 --to=agent --rate=200 --recipient_addr="$hub_addr"
if [[ "$last" != *'"layout":"agent/c4/r200"'* ]] || ! [[ "$last" =~ \"ops\":([0-9]+) ]] ||
  ((BASH_REMATCH[1] < 100 || BASH_REMATCH[1] > 201)); then
  echo "FAILED: a paced publish at 200/s for 1 s did not publish 100..201 times"
  failed=1
fi

# A usage error is reported, not run.
if "$hubbench" nosuchworkload --addr="$addr" 2>/dev/null; then
  echo "FAILED: an unknown workload was accepted"
  failed=1
fi

# The jobs binary's rows (jobs.sh), briefly: a throughput row and two
# latency rows, one with its worker in a child process that is SIGKILLed
# (hubd's default 2 s grace).
jobs_check() {  # jobs_check FIELD FLAGS...: the result is ok and FIELD > 0.
  local field="$1"
  shift
  expect_ok "$field" "$("$jobs" --addr="$hub_addr" --server_pid="$hubd_pid" "$@")" "jobs $*"
}
jobs_check ops_per_s --workload=throughput --workers=2 --duration=1s --warmup=200ms
jobs_check samples --workload=child --rounds=2
jobs_check samples --workload=dead_worker --rounds=1

# A durable no-op (--durable) answers a call only once its row is
# committed: after a run, its database holds at least as many rows as calls
# were answered in the window, whoever commits them.
for mode in inline relay leader; do
  "$noop_server" --listen=127.0.0.1:0 --reply="$mode" \
    --durable="$dir/$mode.sqlite" >"$dir/$mode.out" &
  durable_pid=$!
  for _ in $(seq 100); do
    grep -q "serving on" "$dir/$mode.out" && break
    sleep 0.1
  done
  durable_addr="$(sed -n 's/.*serving on \([^ ]*\).*/\1/p' "$dir/$mode.out")"
  line="$("$hubbench" register --target=noop --addr="$durable_addr" \
    --clients=4 --duration=1s --warmup=200ms)"
  kill -TERM "$durable_pid"
  wait "$durable_pid" || { echo "FAILED: durable $mode did not exit 0"; failed=1; }
  echo "$line"
  rows="$(python3 -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM calls").fetchone()[0])' \
    "$dir/$mode.sqlite")"
  if ! [[ "$line" =~ \"ops\":([0-9]+) ]] || ((BASH_REMATCH[1] == 0 || rows < BASH_REMATCH[1])); then
    echo "FAILED: durable $mode answered ${BASH_REMATCH[1]:-?} calls but holds $rows rows"
    failed=1
  fi
done
if "$noop_server" --reply=inline --durable="$dir/inline.sqlite" 2>/dev/null; then
  echo "FAILED: --durable accepted a file that already exists"
  failed=1
fi

# SIGTERM stops the servers cleanly.
kill -TERM "$pid"
if ! wait "$pid"; then
  echo "FAILED: noop_server did not exit 0 on SIGTERM"
  failed=1
fi
kill -TERM "$hubd_pid"
if ! wait "$hubd_pid"; then
  echo "FAILED: hubd did not exit 0 on SIGTERM"
  failed=1
fi
hubd_pid=""
exit "$failed"
