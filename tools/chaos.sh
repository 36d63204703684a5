#!/usr/bin/env bash
# Chaos run: hubd under mixed load (registrations, heartbeats, reservations,
# acts of held roles, publishes, acks) from tools/chaos/chaos_driver, with
# faults at random moments; after each fault the driver checks that no
# acknowledged write is missing, that no role epoch was handed to two holders
# nor acted on after a newer one, and that epochs never went back. Exit status
# 0 when every check passed.
#
# One hubd over SQLite, SIGKILLed (default 20 times), the file also checked
# by `PRAGMA integrity_check` (docs/RELIABILITY.md):
#   tools/chaos.sh [--kills=20] [--workers=4] [--roles=4] [--seed=N]
#                  [--min_uptime=200ms] [--max_uptime=1200ms]
#
# Several hubds over one PostgreSQL database that this script creates (a
# throw-away, durable server: fsync on, Unix socket only), with faults drawn
# among a hub SIGKILLed, a hub SIGSTOPped past its lease, the hubs' backends
# terminated and the server restarted immediately; at the end every
# acknowledged publish must have been delivered (docs/design/multi-hub.md,
# "Fault runs"):
#   tools/chaos.sh --postgres [--hubs=2] [--faults=20]
#                  [--fault_kinds=kill,stop,terminate,restart,cut]
#                  [--hub_lease=2s --hub_renew_interval=400ms --detach_grace=1s]
#
# From a checkout it builds hubd and the driver with Bazel; under `bazel
# test` (//tools/chaos:chaos_test, chaos_postgres_test) it uses $HUBD and
# $CHAOS_DRIVER. The work directory (database, hubd's logs) is kept in
# $CHAOS_DIR or a temporary directory, and removed after a passing run unless
# CHAOS_KEEP=1; the PostgreSQL server lives in /tmp/hub-chaos-pg.* (PostgreSQL
# runs as `nobody` when this runs as root, and `nobody` must reach it) and is
# stopped at the end; CHAOS_PG_SETTINGS adds server settings ("-c name=value
# ..."). CHAOS_SEED=N is --seed=N: the driver prints its seed first, and a
# run replays with it (`bazel test --test_env=CHAOS_SEED=N ...`).
set -euo pipefail

postgres=0
args=()
for arg in "$@"; do
  case "$arg" in
    --postgres) postgres=1 ;;
    *) args+=("$arg") ;;
  esac
done
if [[ -n "${CHAOS_SEED:-}" ]]; then args+=("--seed=$CHAOS_SEED"); fi

if [[ -z "${HUBD:-}" || -z "${CHAOS_DRIVER:-}" ]]; then
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  source "$root/tools/env.sh"
  (cd "$root" && bazel build "${HUB_BAZEL_FLAGS[@]}" //hub:hubd //tools/chaos:chaos_driver >&2)
  bin="$(cd "$root" && bazel info bazel-bin 2>/dev/null)"
  HUBD="$bin/hub/hubd"
  CHAOS_DRIVER="$bin/tools/chaos/chaos_driver"
fi

dir="${CHAOS_DIR:-$(mktemp -d "${TEST_TMPDIR:-/tmp}/hub-chaos.XXXXXX")}"
mkdir -p "$dir"
status=0
pgdir=""

# A durable PostgreSQL 15 for the run, and $dir/pg_ctl, the driver's handle on
# it: `pg_ctl stop` stops it immediately (no checkpoint: a crash),
# `pg_ctl start` starts it and returns once it accepts connections.
start_postgres() {
  local pg_bin="${PG_BIN:-/usr/lib/postgresql/15/bin}" as_pg=""
  [[ -x "$pg_bin/initdb" ]] || { echo "chaos: no PostgreSQL 15 in $pg_bin (tools/setup.sh installs it)" >&2; exit 2; }
  pgdir="$(mktemp -d /tmp/hub-chaos-pg.XXXXXX)"
  if [[ $EUID -eq 0 ]]; then
    chown nobody:nogroup "$pgdir"
    as_pg="/usr/bin/setpriv --reuid=nobody --regid=nogroup --clear-groups"
  fi
  (cd "$pgdir" && $as_pg "$pg_bin/initdb" -D "$pgdir/data" -A trust -U hub -E UTF8 \
    --locale=C.UTF-8 --locale-provider=icu --icu-locale=en-US --no-sync >"$dir/initdb.log" 2>&1) ||
    { cat "$dir/initdb.log" >&2; exit 2; }
  local options="-c listen_addresses= -c unix_socket_directories=$pgdir -c max_connections=200"
  options+=" -c fsync=on -c full_page_writes=on -c synchronous_commit=on ${CHAOS_PG_SETTINGS:-}"
  cat >"$dir/pg_ctl" <<EOF
#!/bin/sh
cd '$pgdir' || exit 2
case "\$1" in
  stop) exec $as_pg '$pg_bin/pg_ctl' -D '$pgdir/data' -m immediate -w -t 60 stop ;;
  start) exec $as_pg '$pg_bin/pg_ctl' -D '$pgdir/data' -l '$pgdir/server.log' -o '$options' -w -t 60 start ;;
esac
echo "usage: \$0 stop|start" >&2
exit 2
EOF
  chmod +x "$dir/pg_ctl"
  "$dir/pg_ctl" start >"$dir/pg_ctl.log" 2>&1 || { cat "$dir/pg_ctl.log" "$pgdir/server.log" >&2; exit 2; }
  (cd "$pgdir" && $as_pg "$pg_bin/createdb" -h "$pgdir" -U hub chaos)
}

# Stops the server; removes it after a passing run ($1: the exit status).
stop_postgres() {
  [[ -n "$pgdir" ]] || return 0
  if [[ -f "$pgdir/data/postmaster.pid" ]]; then "$dir/pg_ctl" stop >/dev/null 2>&1 || true; fi
  if [[ $1 -eq 0 && "${CHAOS_KEEP:-0}" != 1 ]]; then
    rm -rf "$pgdir"
  else
    echo "chaos: PostgreSQL's data directory and log kept in $pgdir" >&2
  fi
}

if [[ $postgres -eq 1 ]]; then
  trap 'stop_postgres $?' EXIT
  start_postgres
  "$CHAOS_DRIVER" --hubd="$HUBD" --dir="$dir" --db="postgresql://hub@/chaos?host=$pgdir" \
    --pg_ctl="$dir/pg_ctl" "${args[@]}" || status=$?
  trap - EXIT
  stop_postgres $status
  logs=("$dir"/hubd-*.stderr)
else
  command -v sqlite3 >/dev/null || { echo "chaos: the sqlite3 CLI is needed (apt install sqlite3)" >&2; exit 2; }
  "$CHAOS_DRIVER" --hubd="$HUBD" --dir="$dir" "${args[@]}" || status=$?
  logs=("$dir/hubd.stderr")
fi
if [[ $status -ne 0 ]]; then
  echo "chaos: FAILED (exit $status); database and hubd logs kept in $dir" >&2
  tail -n 20 "${logs[@]}" >&2 || true
elif [[ "${CHAOS_KEEP:-0}" != 1 && -z "${CHAOS_DIR:-}" ]]; then
  rm -rf "$dir"
fi
exit $status
