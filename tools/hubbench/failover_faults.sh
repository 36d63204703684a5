#!/usr/bin/env bash
# Cross-hub failover under faults: two hubds on a throw-away PostgreSQL 15;
# in each round the holder of a cto role is attached to hub A and its
# successor to hub B, and the holder's stream is cut (`failover
# --holder_addr`, --leave=crash). Meanwhile, unless --fault_period=0, every
# backend of the hubs' database is terminated (pg_terminate_backend) at
# random intervals of 0.5-1.5 x --fault_period. Prints the failover line
# (p50/p99/max over the rounds that completed) and, from hubd's logs, each
# round's phases: cut -> revoke (the detach grace and the release), revoke
# -> the successor's reservation, reservation -> the successor's ACK, with
# the slowest rounds and the hint failures (`*_hint_not_sent`) logged.
#
#   tools/hubbench/failover_faults.sh [--rounds=60] [--fault_period=1.5]
#                                     [--detach_grace=500ms] [--keep]
#
# Builds hubd and the failover benchmark (fastbuild, like the tests).
# --keep leaves the logs (hubd0.log, hubd1.log, bench.err, faults.log) and
# prints their directory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$HUB_ROOT"

rounds=60
fault_period=1.5
grace=500ms
keep=0
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds="${arg#*=}" ;;
    --fault_period=*) fault_period="${arg#*=}" ;;
    --detach_grace=*) grace="${arg#*=}" ;;
    --keep) keep=1 ;;
    *) hub_usage "$0"; exit 64 ;;
  esac
done
pgbin=/usr/lib/postgresql/15/bin
[[ -x "$pgbin/postgres" ]] || { echo "failover_faults.sh: no PostgreSQL 15: run tools/setup.sh" >&2; exit 1; }
bazel build "${HUB_BAZEL_FLAGS[@]}" //hub:hubd //tools/hubbench:failover >&2
bin="$(bazel info "${HUB_BAZEL_FLAGS[@]}" bazel-bin 2>/dev/null)"

w="$(mktemp -d /tmp/hub-failover-faults.XXXXXX)"
as_pg=()
if ((EUID == 0)); then
  chown nobody:nogroup "$w"
  as_pg=(/usr/bin/setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi
pg() { (cd "$w" && "${as_pg[@]}" "$pgbin/$1" "${@:2}"); }
pids=()
pg_started=0
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((pg_started)); then pg pg_ctl -D "$w/data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  if ((keep)); then echo "logs: $w"; else rm -rf "$w"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pg initdb -D "$w/data" -A trust -U hub -E UTF8 --locale=C.UTF-8 >"$w/initdb.log" 2>&1 ||
  { cat "$w/initdb.log" >&2; exit 1; }
pg pg_ctl -D "$w/data" -l "$w/server.log" -w -t 60 start \
  -o "-c listen_addresses= -c unix_socket_directories=$w" >/dev/null ||
  { cat "$w/server.log" >&2; exit 1; }
pg_started=1
pg psql -h "$w" -U hub -d postgres -XAtq -c "CREATE DATABASE hub" >/dev/null
url="postgresql://hub@/hub?host=$w"
addrs=()
for i in 0 1; do
  "$bin/hub/hubd" --db="$url" --listen=127.0.0.1:0 --detach_grace="$grace" \
    --hub_lease=2s --hub_renew_interval=400ms >"$w/hubd$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    grep -q 'event=hub_started' "$w/hubd$i.log" && break
    sleep 0.1
  done
  addrs+=("$(grep -o 'event=hub_started [^ ]* address=[^ ]*' "$w/hubd$i.log" | sed 's/.*address=//')")
done
if [[ "$fault_period" != 0 ]]; then
  (
    while true; do
      sleep "$(python3 -c "import random; print($fault_period * (0.5 + random.random()))" 2>/dev/null)" || exit 0
      pg psql -h "$w" -U hub -d postgres -XAtq -c "SELECT count(pg_terminate_backend(pid)) \
        FROM pg_stat_activity WHERE datname = 'hub'" >/dev/null 2>&1 || true
      python3 -c 'import time; print(int(time.time() * 1000))' >>"$w/faults.log" 2>/dev/null || exit 0
    done
  ) &
  pids+=($!)
fi
touch "$w/faults.log"
"$bin/tools/hubbench/failover" --target=hub --addr="${addrs[1]}" \
  --holder_addr="${addrs[0]}" --rounds="$rounds" --skip_failed_rounds \
  --print_rounds 2>"$w/bench.err" || true
python3 tools/hubbench/failover_phases.py "$w"
