#!/usr/bin/env bash
# hubd on PostgreSQL beside hubd on SQLite, at the same durability, in one
# run: starts a throw-away PostgreSQL 15 (initdb into a fresh directory
# under /tmp, a Unix socket only, fsync=on, synchronous_commit=on,
# full_page_writes=on, every other setting its default; as `nobody` under
# root), runs each row on a fresh hubd per store (SQLite: a new file under
# /tmp, synchronous=FULL; PostgreSQL: a new database), alternating which
# store goes first, and stops the server on exit.
#
#   tools/hubbench/postgres.sh [--repeat=3] [--duration=3s]
#       [--only=register,cas,publish,heartbeat,crosshub,takeover]
#       [--out=FILE] [--ab=HUBD_A,HUBD_B] [--hubd=PATH --hubbench=PATH]
#       [--fresh] [--hubs=2,3] [--etcd] [--statements=N]
#       [--takeover_rounds=5] [--db_cpus=LIST]
#
#   --repeat    rounds; the table shows medians over them.
#   --duration  measured window of each row (after a 1 s warm-up run).
#   --only      rows: register (c1, c64), cas (distinct keys, c16), publish
#               (to an attached agent that acks, c64), heartbeat (s64/c64),
#               crosshub (publish to an agent at a paced 500/s from 64
#               publishers, not flat out: on postgres-xN the publishers on
#               the first hub and the recipient on the second, every
#               message routed; on one hub, the same load delivered locally),
#               takeover (postgres-xN only: a role's holder on the first
#               hub and its successor on the second; the first hub is sent
#               SIGKILL and the clock runs until the successor's ACK is
#               accepted; hubd's default lease, renewal and grace).
#   --takeover_rounds  takeovers per variant and round (a fresh database
#               and hubs each).
#   --out       also keep the JSON result lines in FILE.
#   --ab        instead of SQLite against PostgreSQL: two hubd binaries,
#               both on PostgreSQL, alternated (an A/B of a change).
#   --hubd, --hubbench  prebuilt binaries (default: built here, -c opt);
#               the takeover row runs the failover binary beside hubbench.
#   --fresh     no ANALYZE after the warm-up: PostgreSQL as a brand-new
#               database runs until autovacuum first analyzes it.
#   --hubs      also rows on N hubds sharing one database (postgres-xN),
#               the clients spread over them (publish: the recipient's
#               stream on one hub, the publishers on all, so most
#               publishes are routed to another hub).
#   --etcd      also etcd 3.4 (one member, a fresh data directory per row)
#               running the same workloads where it has them (register =
#               LeaseGrant, cas = a transaction on distinct keys, heartbeat
#               = lease keep-alives; no publish).
#   --statements  also load pg_stat_statements (track=all: statements run
#               inside functions and triggers too) and, after each
#               PostgreSQL row, print its N costliest statements over the
#               measured window: calls and execution time per operation.
#   --db_cpus   PostgreSQL on these CPUs (taskset's list, e.g. 1) and
#               everything else (hubd, hubbench, etcd) on the others, as if
#               the database had a machine of its own; by default all share
#               every core.
#
# Per row and store: throughput, p50/p99 (publish: publish-to-arrival on the
# recipient's stream), and CPU per operation read from /proc over the
# measured window: hubd's (by thread name too) and PostgreSQL's (client
# backends, plus its own processes: walwriter, checkpointer, ...); the
# backends also by the connection they serve (hubd's writer, readers,
# notifier, listener, membership: their application_name). Both run on the
# same cores as the load generator.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$HUB_ROOT"

repeat=3
duration=3s
only=register,cas,publish,heartbeat,crosshub,takeover
takeover_rounds=5
out=""
ab=""
hubd=""
hubbench=""
fresh=0
hubs=""
etcd=0
statements=0
db_cpus=""
for arg in "$@"; do
  case "$arg" in
    --repeat=*) repeat="${arg#*=}" ;;
    --duration=*) duration="${arg#*=}" ;;
    --only=*) only="${arg#*=}" ;;
    --out=*) out="${arg#*=}" ;;
    --ab=*) ab="${arg#*=}" ;;
    --hubd=*) hubd="${arg#*=}" ;;
    --hubbench=*) hubbench="${arg#*=}" ;;
    --fresh) fresh=1 ;;
    --hubs=*) hubs="${arg#*=}" ;;
    --etcd) etcd=1 ;;
    --statements=*) statements="${arg#*=}" ;;
    --takeover_rounds=*) takeover_rounds="${arg#*=}" ;;
    --db_cpus=*) db_cpus="${arg#*=}" ;;
    *) hub_usage "$0"; exit 64 ;;
  esac
done
pgbin=/usr/lib/postgresql/15/bin
[[ -x "$pgbin/postgres" ]] || { echo "postgres.sh: no PostgreSQL 15: run tools/setup.sh" >&2; exit 1; }

work="$(mktemp -d -t hubbench-pg.XXXXXX)"
pgdir="$(mktemp -d /tmp/hub-pg-bench.XXXXXX)"
hubd_pids=()
pg_started=0
as_pg=()
if ((EUID == 0)); then
  chown nobody:nogroup "$pgdir"
  as_pg=(/usr/bin/setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi
# on_db / on_hub: run on PostgreSQL's CPUs or on the others (--db_cpus).
on_db=()
on_hub=()
if [[ -n "$db_cpus" ]]; then
  hub_cpus="$(python3 tools/hubbench/postgres.py other_cpus "$db_cpus")" || exit 64
  on_db=(taskset -c "$db_cpus")
  on_hub=(taskset -c "$hub_cpus")
fi
pg() { (cd "$pgdir" && "${on_db[@]}" "${as_pg[@]}" "$pgbin/$1" "${@:2}"); }
stop_hubd() {
  local pid
  for pid in "${hubd_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  hubd_pids=()
}
cleanup() {
  stop_hubd
  if ((pg_started)); then pg pg_ctl -D "$pgdir/data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$work" "$pgdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -z "$hubd" || -z "$hubbench" ]]; then
  echo "postgres.sh: building (-c opt)" >&2
  bazel build "${HUB_BAZEL_FLAGS[@]}" -c opt //hub:hubd //tools/hubbench:hubbench \
    //tools/hubbench:failover
  bazel_bin="$(bazel info "${HUB_BAZEL_FLAGS[@]}" -c opt bazel-bin 2>/dev/null)"
  # Copies: another build may repoint bazel-bin while we run.
  cp "$bazel_bin/hub/hubd" "$work/hubd"
  cp "$bazel_bin/tools/hubbench/hubbench" "$bazel_bin/tools/hubbench/failover" "$work/"
  hubd="${hubd:-$work/hubd}"
  hubbench="${hubbench:-$work/hubbench}"
fi
failover="$(dirname "$hubbench")/failover"
# variants: "label store binary"
variants=("sqlite sqlite $hubd" "postgres postgres $hubd")
if [[ -n "$ab" ]]; then
  variants=("A postgres ${ab%%,*}" "B postgres ${ab#*,}")
fi
for n in ${hubs//,/ }; do
  variants+=("postgres-x$n postgres-x$n $hubd")
done
if ((etcd)); then
  command -v etcd >/dev/null || { echo "postgres.sh: etcd missing: run tools/setup.sh" >&2; exit 1; }
  variants+=("etcd etcd -")
fi

pg initdb -D "$pgdir/data" -A trust -U hub -E UTF8 --locale=C.UTF-8 >"$work/initdb.log" 2>&1 ||
  { cat "$work/initdb.log" >&2; exit 1; }
stats_opts=""
((statements)) && stats_opts="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
pg pg_ctl -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 start \
  -o "-c listen_addresses= -c unix_socket_directories=$pgdir -c max_connections=200 -c fsync=on -c synchronous_commit=on -c full_page_writes=on $stats_opts" \
  >/dev/null || { cat "$pgdir/server.log" >&2; exit 1; }
pg_started=1
pm_pid="$(head -1 "$pgdir/data/postmaster.pid")"
pg_settings="$(pg psql -h "$pgdir" -U hub -d postgres -XAtq -c \
  "SELECT string_agg(name || '=' || setting, ' ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync','synchronous_commit','full_page_writes','wal_sync_method','shared_buffers','server_version')")"

# The disk's sync rate in the same directory (8 KiB pwrite + fdatasync for
# 1 s), at the start and the end: it bounds one-sync-per-commit figures and
# moves by 10x on a shared machine.
raw_fsync() {
  python3 -c 'import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
n, end = 0, time.monotonic() + 1
while time.monotonic() < end:
    os.pwrite(fd, b"x" * 8192, 0)
    os.fdatasync(fd)
    n += 1
os.close(fd)
os.unlink(sys.argv[1])
print(f"{n}/s")' "$work/fsync.probe"
}

results="$work/results.jsonl"
: >"$results"
dbs=0
# start_hubd STORE BINARY: a fresh hubd on a new SQLite file or database;
# STORE postgres-xN: N hubds sharing a new database. Sets hubd_pids and
# hubd_addr (comma-separated when several).
start_hubd() {
  local dir="$work/hubd.$((++dbs))" db count=1 i pid addr
  mkdir -p "$dir"
  if [[ "$1" == etcd ]]; then
    local client peer
    read -r client peer <<<"$(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')"
    "${on_hub[@]}" etcd --name hubbench --data-dir "$dir/data" \
      --listen-client-urls "http://127.0.0.1:$client" \
      --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" \
      --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "hubbench=http://127.0.0.1:$peer" \
      --logger=zap --log-level=error >"$dir/out.1" 2>"$dir/err.1" &
    hubd_pids+=("$!")
    hubd_addr="127.0.0.1:$client"
    for _ in $(seq 200); do
      ETCDCTL_API=3 etcdctl --dial-timeout=1s --endpoints="$hubd_addr" endpoint health \
        >/dev/null 2>&1 && return 0
      kill -0 "${hubd_pids[0]}" 2>/dev/null || break
      sleep 0.1
    done
    tail -5 "$dir/err.1" >&2
    return 1
  fi
  if [[ "$1" == sqlite ]]; then
    db="$dir/hub.sqlite"
  else
    pg createdb -h "$pgdir" -U hub "hb$dbs"
    db="postgresql://hub@/hb$dbs?host=$pgdir"
    [[ "$1" == postgres-x* ]] && count="${1#postgres-x}"
  fi
  hubd_addr=""
  for ((i = 1; i <= count; i++)); do
    "${on_hub[@]}" "$2" --listen=127.0.0.1:0 --db="$db" --synchronous=full >"$dir/out.$i" 2>"$dir/err.$i" &
    pid=$!
    hubd_pids+=("$pid")
    for _ in $(seq 200); do
      grep -q "serving on" "$dir/out.$i" 2>/dev/null && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    addr="$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$dir/out.$i")"
    [[ -n "$addr" ]] || { tail -5 "$dir/err.$i" >&2; return 1; }
    hubd_addr="${hubd_addr:+$hubd_addr,}$addr"
  done
}

# row WORKLOAD FLAGS...: the row on every variant, first-to-run alternating
# by round.
row() {
  local workload="$1"
  shift
  [[ ",$only," == *",$workload,"* ]] || return 0
  # Who goes first rotates by round.
  local order=() n=${#variants[@]} i
  for ((i = 0; i < n; i++)); do order+=("${variants[$(((i + round) % n))]}"); done
  local run="$workload"
  [[ "$workload" == crosshub ]] && run=publish
  for v in "${order[@]}"; do
    read -r label store binary <<<"$v"
    # etcd has no publish.
    [[ "$store" == etcd && "$run" == publish ]] && continue
    local target=hub
    [[ "$store" == etcd ]] && target=etcd
    local pm=0
    [[ "$store" == postgres* ]] && pm="$pm_pid"
    if ! start_hubd "$store" "$binary"; then
      echo "postgres.sh: hubd on $store did not start" >&2
      stop_hubd
      continue
    fi
    local before after line addr=(--addr="$hubd_addr")
    if [[ "$workload" == crosshub && "$hubd_addr" == *,* ]]; then
      local rest="${hubd_addr#*,}"
      addr=(--addr="${hubd_addr%%,*}" --recipient_addr="${rest%%,*}")
    fi
    "${on_hub[@]}" "$hubbench" "$run" --target="$target" "${addr[@]}" --duration=1s "$@" \
      >/dev/null 2>>"$work/hubbench.err" || true
    # A database in use has statistics (autovacuum analyzes within a minute
    # or so); a fresh one has none, and the writer's cached plans, made on
    # near-empty tables, scan message_inbox in full per ack. ANALYZE
    # replans them: the figures are a database's steady state.
    if [[ "$store" == postgres* ]] && ((!fresh)); then
      pg psql -h "$pgdir" -U hub -d "hb$dbs" -XAq -c ANALYZE
    fi
    if [[ "$store" == postgres* ]] && ((statements)); then
      pg psql -h "$pgdir" -U hub -d "hb$dbs" -XAq \
        -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
        -c "SELECT pg_stat_statements_reset()" >/dev/null
    fi
    before="$(python3 tools/hubbench/postgres.py snapshot "$(IFS=,; echo "${hubd_pids[*]}")" "$pm")"
    line="$("${on_hub[@]}" "$hubbench" "$run" --target="$target" "${addr[@]}" \
      --duration="$duration" "$@" 2>>"$work/hubbench.err")" || true
    after="$(python3 tools/hubbench/postgres.py snapshot "$(IFS=,; echo "${hubd_pids[*]}")" "$pm")"
    # Which backend is which of hubd's connections (writer, readers, ...),
    # while they are still open.
    local names=""
    if [[ "$store" == postgres* ]]; then
      names="$(pg psql -h "$pgdir" -U hub -d postgres -XAtq -F $'\t' -c \
        "SELECT pid, application_name FROM pg_stat_activity WHERE backend_type = 'client backend'")" || names=""
    fi
    local top=""
    if [[ "$store" == postgres* ]] && ((statements)); then
      top="$(pg psql -h "$pgdir" -U hub -d "hb$dbs" -XAtq -F $'\t' -c \
        "SELECT calls, total_exec_time, rows, toplevel, regexp_replace(query, '\s+', ' ', 'g') FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT $statements")"
    fi
    stop_hubd
    if [[ -z "$line" ]]; then
      echo "postgres.sh: hubbench $workload $* failed on $label" >&2
      continue
    fi
    line="$(python3 tools/hubbench/postgres.py line "$line" "$before" "$after" "$label" "$names")"
    echo "$line" >>"$results"
    echo "  $line" >&2
    if [[ -n "$top" ]]; then
      python3 tools/hubbench/postgres.py statements "$line" "$top" >&2
    fi
  done
}

# takeover_row: on each postgres-xN variant, $takeover_rounds times on a
# fresh database: a role's holder attached to the first hub, its successor to
# the second; the first hub is SIGKILLed (by the failover binary, once the
# holder is active) and the clock runs until the successor's ACK is accepted.
# (bash reports each killed hub as "Killed" on stderr.)
takeover_row() {
  [[ ",$only," == *",takeover,"* ]] || return 0
  local v label store binary i line first rest
  for v in "${variants[@]}"; do
    read -r label store binary <<<"$v"
    [[ "$store" == postgres-x* ]] || continue
    [[ -x "$failover" ]] || { echo "postgres.sh: no $failover: no takeover row" >&2; return 0; }
    for ((i = 1; i <= takeover_rounds; i++)); do
      if ! start_hubd "$store" "$binary"; then
        echo "postgres.sh: hubds on $store did not start" >&2
        stop_hubd
        continue
      fi
      first="${hubd_addr%%,*}"
      rest="${hubd_addr#*,}"
      line="$("${on_hub[@]}" "$failover" --target=hub --addr="${rest%%,*}" --holder_addr="$first" \
        --holder_pid="${hubd_pids[0]}" --leave=hub_killed --rounds=1 \
        2>>"$work/hubbench.err")" || true
      stop_hubd
      if [[ -z "$line" ]]; then
        echo "postgres.sh: takeover failed on $label" >&2
        continue
      fi
      line="$(python3 tools/hubbench/postgres.py line "$line" '{}' '{}' "$label")"
      echo "$line" >>"$results"
      echo "  $line" >&2
    done
  done
}

echo "postgres.sh: $(date -u '+%F %T') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "duration $duration, repeat $repeat, raw fdatasync $(raw_fsync); PostgreSQL: $pg_settings" \
  "${db_cpus:+; PostgreSQL on CPU $db_cpus, the rest on CPU $hub_cpus}" >&2
for ((round = 1; round <= repeat; round++)); do
  echo "postgres.sh: round $round of $repeat, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  row register --clients=1
  row register --clients=64
  row cas --clients=16 --keys=distinct
  row publish --clients=64 --to=agent
  row heartbeat --streams=64 --connections=64
  row crosshub --clients=64 --to=agent --rate=500
  takeover_row
done
echo "postgres.sh: done $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "raw fdatasync $(raw_fsync)" >&2
[[ -n "$out" ]] && cp "$results" "$out"
python3 tools/hubbench/postgres.py report "$results"
