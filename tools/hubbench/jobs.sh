#!/usr/bin/env bash
# JobService's figures (issue 46) side by side in one run: hubd on SQLite and
# on PostgreSQL, pg-boss and graphile-worker on the same PostgreSQL, and hub's
# own durable publish rate; then how soon a job is claimable again after its
# worker dies, fails or deregisters, a deadline passes or a parent completes.
# Starts a throw-away PostgreSQL 15 (as postgres.sh: initdb under /tmp, a
# Unix socket only, fsync, synchronous_commit and full_page_writes on; as
# `nobody` under root), a fresh hubd per row (SQLite: a new file,
# synchronous=FULL; PostgreSQL: a new database), a new database per queue
# row, and stops everything on exit. Prints the table (medians over rounds).
#
#   tools/hubbench/jobs.sh [--repeat=3] [--duration=3s] [--workers=8,32]
#       [--rounds=20] [--queue_rounds=10] [--detach_grace=2s]
#       [--only=throughput,latency,queues] [--out=FILE]
#       [--hubd=PATH --jobs=PATH]
#
#   --repeat        rounds of the throughput rows (first store alternating).
#   --duration      measured window of each throughput row (after 1 s).
#   --workers       concurrent workers of the throughput rows.
#   --rounds        samples of each hub latency row (dead_worker, fail,
#                   deregister, deadline, child), per store.
#   --queue_rounds  samples of pg-boss's dead-worker row.
#   --detach_grace  hubd's --detach_grace (its default is 2 s).
#   --only          throughput (hub and the queues' throughput, hub's
#                   publish), latency (hub's latency rows), queues (pg-boss's
#                   dead worker).
#   --out           also keep the JSON result lines in FILE.
#   --hubd, --jobs  prebuilt binaries (default: built here, -c opt).
#
# What each row does: tools/hubbench/jobs_main.cc (hub) and
# tools/hubbench/queues/queues.mjs (pg-boss, graphile-worker). Needs
# tools/setup.sh (PostgreSQL 15; pg-boss and graphile-worker from npm into
# $HUB_CACHE_DIR/hubbench-queues).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$HUB_ROOT"

repeat=3
duration=3s
workers=8,32
rounds=20
queue_rounds=10
grace=2s
only=throughput,latency,queues
out=""
hubd=""
jobs=""
for arg in "$@"; do
  case "$arg" in
    --repeat=*) repeat="${arg#*=}" ;;
    --duration=*) duration="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}" ;;
    --rounds=*) rounds="${arg#*=}" ;;
    --queue_rounds=*) queue_rounds="${arg#*=}" ;;
    --detach_grace=*) grace="${arg#*=}" ;;
    --only=*) only="${arg#*=}" ;;
    --out=*) out="${arg#*=}" ;;
    --hubd=*) hubd="${arg#*=}" ;;
    --jobs=*) jobs="${arg#*=}" ;;
    *) hub_usage "$0"; exit 64 ;;
  esac
done
pgbin=/usr/lib/postgresql/15/bin
[[ -x "$pgbin/postgres" ]] || { echo "jobs.sh: no PostgreSQL 15: run tools/setup.sh" >&2; exit 1; }
for m in pg-boss graphile-worker; do
  [[ -f "$HUB_QUEUES_MODULES/$m/package.json" ]] ||
    { echo "jobs.sh: no $m in $HUB_QUEUES_MODULES: run tools/setup.sh" >&2; exit 1; }
done

work="$(mktemp -d -t hubbench-jobs.XXXXXX)"
pgdir="$(mktemp -d /tmp/hub-pg-jobs.XXXXXX)"
hubd_pid=""
pg_started=0
as_pg=()
if ((EUID == 0)); then
  chown nobody:nogroup "$pgdir"
  as_pg=(/usr/bin/setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi
pg() { (cd "$pgdir" && "${as_pg[@]}" "$pgbin/$1" "${@:2}"); }
stop_hubd() {
  [[ -n "$hubd_pid" ]] || return 0
  kill -TERM "$hubd_pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$hubd_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$hubd_pid" 2>/dev/null || true
  wait "$hubd_pid" 2>/dev/null || true
  hubd_pid=""
}
cleanup() {
  stop_hubd
  if ((pg_started)); then pg pg_ctl -D "$pgdir/data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$work" "$pgdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -z "$hubd" || -z "$jobs" ]]; then
  echo "jobs.sh: building (-c opt)" >&2
  bazel build "${HUB_BAZEL_FLAGS[@]}" -c opt //hub:hubd //tools/hubbench:jobs
  bazel_bin="$(bazel info "${HUB_BAZEL_FLAGS[@]}" -c opt bazel-bin 2>/dev/null)"
  # Copies: another build may repoint bazel-bin while we run.
  cp "$bazel_bin/hub/hubd" "$bazel_bin/tools/hubbench/jobs" "$work/"
  hubd="${hubd:-$work/hubd}"
  jobs="${jobs:-$work/jobs}"
fi

pg initdb -D "$pgdir/data" -A trust -U hub -E UTF8 --locale=C.UTF-8 >"$work/initdb.log" 2>&1 ||
  { cat "$work/initdb.log" >&2; exit 1; }
pg pg_ctl -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 start \
  -o "-c listen_addresses= -c unix_socket_directories=$pgdir -c max_connections=200 -c fsync=on -c synchronous_commit=on -c full_page_writes=on" \
  >/dev/null || { cat "$pgdir/server.log" >&2; exit 1; }
pg_started=1

results="$work/results.jsonl"
: >"$results"
dbs=0
# new_db: a fresh database on the server; sets db_name.
new_db() {
  db_name="hb$((++dbs))"
  pg createdb -h "$pgdir" -U hub "$db_name"
}
# start_hubd STORE: a fresh hubd on a new SQLite file or PostgreSQL database;
# sets hubd_pid and hubd_addr.
start_hubd() {
  local dir="$work/hubd.$((++dbs))" db
  mkdir -p "$dir"
  if [[ "$1" == sqlite ]]; then
    db="$dir/hub.sqlite"
  else
    new_db
    db="postgresql://hub@/$db_name?host=$pgdir"
  fi
  "$hubd" --listen=127.0.0.1:0 --db="$db" --synchronous=full --detach_grace="$grace" \
    >"$dir/out" 2>"$dir/err" &
  hubd_pid=$!
  for _ in $(seq 200); do
    grep -q "serving on" "$dir/out" 2>/dev/null && break
    kill -0 "$hubd_pid" 2>/dev/null || break
    sleep 0.1
  done
  hubd_addr="$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$dir/out")"
  [[ -n "$hubd_addr" ]] || { tail -5 "$dir/err" >&2; return 1; }
}
# record LINE WHAT: keeps a result line (or an error line for WHAT).
record() {
  local line="$1"
  [[ -n "$line" ]] || line="{\"target\":\"${2%% *}\",\"workload\":\"${2#* }\",\"status\":\"error\",\"error\":\"see stderr\"}"
  echo "$line" >>"$results"
  echo "  $line" >&2
}
# hub_row STORE WORKLOAD FLAGS...: the jobs binary on a fresh hubd.
hub_row() {
  local store="$1" workload="$2" line=""
  shift 2
  if start_hubd "$store"; then
    line="$("$jobs" --addr="$hubd_addr" --store="$store" --workload="$workload" \
      --server_pid="$hubd_pid" "$@" 2>>"$work/jobs.err")" || line=""
  fi
  stop_hubd
  [[ -n "$line" ]] || tail -3 "$work/jobs.err" >&2
  record "$line" "hub $workload"
}
# queue_row QUEUE WORKLOAD FLAGS...: queues.mjs on a fresh database.
queue_row() {
  local queue="$1" workload="$2" line=""
  shift 2
  new_db
  line="$(node tools/hubbench/queues/queues.mjs --queue="$queue" --workload="$workload" \
    --host="$pgdir" --db="$db_name" "$@" 2>>"$work/queues.err")" || line=""
  [[ -n "$line" ]] || tail -3 "$work/queues.err" >&2
  record "$line" "$queue $workload"
}
has() { [[ ",$only," == *",$1,"* ]]; }

seconds="${duration%s}"
echo "jobs.sh: $(date -u '+%F %T') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "duration $duration, repeat $repeat, workers $workers, detach grace $grace," \
  "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- hub storage registry records || echo +changes)" >&2
if has throughput; then
  for ((round = 1; round <= repeat; round++)); do
    echo "jobs.sh: throughput round $round of $repeat, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    stores=(sqlite postgres)
    ((round % 2)) || stores=(postgres sqlite)
    for n in ${workers//,/ }; do
      for store in "${stores[@]}"; do
        hub_row "$store" throughput --workers="$n" --duration="$duration"
        hub_row "$store" publish --workers="$n" --duration="$duration"
      done
      queue_row pgboss throughput --workers="$n" --duration="$seconds"
      queue_row graphile throughput --workers="$n" --duration="$seconds"
      queue_row graphile-batched throughput --workers="$n" --duration="$seconds"
    done
  done
fi
if has latency; then
  for store in sqlite postgres; do
    echo "jobs.sh: latency rows on $store, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    for w in dead_worker fail deregister deadline child; do
      hub_row "$store" "$w" --rounds="$rounds"
    done
  done
fi
if has queues; then
  echo "jobs.sh: pg-boss dead worker, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  queue_row pgboss dead_worker --rounds="$queue_rounds"
fi
echo "jobs.sh: done $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
[[ -n "$out" ]] && cp "$results" "$out"
python3 tools/hubbench/jobs_report.py "$results" "$grace"
