#!/usr/bin/env bash
# Runs every hubbench workload against hubd, the no-op ceiling and etcd 3.4,
# one target after the other on this machine, and prints a table per workload
# with the three side by side and the ratios hub/ceiling and hub/etcd.
#
#   tools/hubbench/run.sh [--duration=3s] [--idle_window=10s] [--repeat=1]
#                         [--quick]
#                         [--only=register,heartbeat,idle,cas,publish,failover]
#                         [--failover_rounds=100] [--out=FILE]
#                         [--ab=HUBD_A,HUBD_B]
#
#   --duration     measured window of each row; at most 120s. Each row also
#                  has a 0.5 s warm-up and its setup.
#   --idle_window  idle rows: the window over which server CPU is read.
#   --repeat       runs of the whole suite; the tables show medians.
#   --quick        idle rows with 1,000 streams instead of 10,000.
#   --only         the workloads to run (comma-separated).
#   --failover_rounds  failovers per target (latency: holder gone -> successor
#                  active; hub: kill the holder's stream, etcd: revoke the
#                  leader's lease under v3election Campaign; then a holder
#                  leaving on purpose: hub goodbye and ReleaseRole, etcd
#                  Resign). No ceiling.
#   --out          also keep the JSON result lines in FILE.
#   --ab           instead of hubd beside the ceiling and etcd: two hubd
#                  binaries (-c opt builds of two commits), each row on A
#                  then B, the order swapped every round (an A/B of a
#                  change); the tables show A, B and B/A. No failover rows.
#
# Every server is started fresh for each row (hubd on a new database, etcd on
# a new data dir, all on 127.0.0.1) and stopped after it; everything started
# here is stopped on exit, also on failure or Ctrl-C. Rows hubd does not serve
# yet (it answers UNIMPLEMENTED) show "n/a". Needs tools/setup.sh (etcd).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$HUB_ROOT"

duration=3s
idle_window=10s
repeat=1
quick=0
only=register,heartbeat,idle,cas,publish,failover
failover_rounds=100
out=""
ab=""
for arg in "$@"; do
  case "$arg" in
    --duration=*) duration="${arg#*=}" ;;
    --idle_window=*) idle_window="${arg#*=}" ;;
    --repeat=*) repeat="${arg#*=}" ;;
    --quick) quick=1 ;;
    --only=*) only="${arg#*=}" ;;
    --out=*) out="${arg#*=}" ;;
    --failover_rounds=*) failover_rounds="${arg#*=}" ;;
    --ab=*) ab="${arg#*=}" ;;
    *) hub_usage "$0"; exit 64 ;;
  esac
done

work="$(mktemp -d -t hubbench.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then stop_server; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Bounded wait for a started server: until CHECK-COMMAND succeeds (its
# "serving on" line, a health probe). Fails when PID dies or after 20 s.
wait_for() {  # wait_for PID CHECK-COMMAND...
  local pid="$1"
  shift
  for _ in $(seq 200); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# start_server TARGET: starts it fresh and sets server_pid and server_addr.
start_server() {
  local dir="$work/$1.$((++started))"
  mkdir -p "$dir"
  case "$1" in
    noop)
      "$bin/noop_server" --listen=127.0.0.1:0 >"$dir/out" 2>"$dir/err" &
      server_pid=$!
      wait_for "$server_pid" grep -q "serving on" "$dir/out" || return 1
      server_addr="$(sed -n 's/.*serving on \([^ ]*\).*/\1/p' "$dir/out")"
      ;;
    hub | A | B)
      local hubd="$bin/hubd"
      [[ "$1" == hub ]] || hubd="$bin/hubd_$1"
      "$hubd" --listen=127.0.0.1:0 --db="$dir/hub.sqlite" >"$dir/out" 2>"$dir/err" &
      server_pid=$!
      wait_for "$server_pid" grep -q "serving on" "$dir/out" || return 1
      server_addr="$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$dir/out")"
      ;;
    etcd)
      local ports client peer
      ports="$(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')"
      read -r client peer <<<"$ports"
      etcd --name hubbench --data-dir "$dir/data" \
        --listen-client-urls "http://127.0.0.1:$client" \
        --advertise-client-urls "http://127.0.0.1:$client" \
        --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "hubbench=http://127.0.0.1:$peer" \
        --logger=zap --log-level=error >"$dir/out" 2>"$dir/err" &
      server_pid=$!
      server_addr="127.0.0.1:$client"
      wait_for "$server_pid" env ETCDCTL_API=3 etcdctl --dial-timeout=1s \
        --endpoints="$server_addr" endpoint health || return 1
      ;;
  esac
}

# row WORKLOAD LAYOUT FLAGS...: the workload on each target, one after the
# other. LAYOUT is what hubbench prints for FLAGS (used if it crashes).
row() {
  local workload="$1" layout="$2"
  shift 2
  [[ ",$only," == *",$workload,"* ]] || return 0
  local window="$duration"
  [[ "$workload" == idle ]] && window="$idle_window"
  local targets=(hub noop etcd)
  if [[ -n "$ab" ]]; then
    targets=(A B)
    ((round % 2)) || targets=(B A)
  fi
  for target in "${targets[@]}"; do
    # etcd has no publish: the ceiling is the only reference there.
    [[ "$workload" == publish && "$target" == etcd ]] && continue
    [[ "$target" == hub && "$have_hub" == 0 ]] && continue
    if ! start_server "$target"; then
      echo "run.sh: $target did not start:" >&2
      tail -5 "$work/$target.$started/err" >&2 || true
      [[ -n "$server_pid" ]] && stop_server
      continue
    fi
    local line
    local protocol="$target"
    [[ "$target" == A || "$target" == B ]] && protocol=hub
    line="$("$bin/hubbench" "$workload" --target="$protocol" --addr="$server_addr" \
      --server_pid="$server_pid" --duration="$window" "$@" 2>>"$work/hubbench.err")" || true
    stop_server
    # An A/B row carries its variant as its target.
    [[ "$protocol" == "$target" ]] || line="${line/\"target\":\"hub\"/\"target\":\"$target\"}"
    [[ -n "$line" ]] || line="{\"target\":\"$target\",\"workload\":\"$workload\",\"layout\":\"$layout\",\"status\":\"error\",\"error\":\"hubbench failed\"}"
    echo "$line" >>"$results"
    echo "  $line" >&2
  done
}

# failover_row: failover latency on hub, then etcd (no ceiling: a no-op
# server has no roles): a holder that crashes (hub: its stream is cut, the
# detach grace runs; etcd: its lease is revoked), then one that leaves on
# purpose (hub: a goodbye on its stream, or ReleaseRole; etcd: Resign).
failover_row() {
  [[ ",$only," == *",failover,"* && -z "$ab" ]] || return 0
  local spec target leave layout
  for spec in "hub crash" "hub goodbye" "hub release" "etcd crash" "etcd resign"; do
    read -r target leave <<<"$spec"
    layout="r$failover_rounds"
    [[ "$leave" == crash ]] || layout="$layout/$leave"
    [[ "$target" == hub && "$have_hub" == 0 ]] && continue
    if ! start_server "$target"; then
      echo "run.sh: $target did not start:" >&2
      tail -5 "$work/$target.$started/err" >&2 || true
      [[ -n "$server_pid" ]] && stop_server
      continue
    fi
    local line
    line="$("$bin/failover" --target="$target" --addr="$server_addr" \
      --rounds="$failover_rounds" --leave="$leave" 2>>"$work/hubbench.err")" || true
    stop_server
    [[ -n "$line" ]] || line="{\"target\":\"$target\",\"workload\":\"failover\",\"layout\":\"$layout\",\"status\":\"error\",\"error\":\"failover failed\"}"
    echo "$line" >>"$results"
    echo "  $line" >&2
  done
}

# Optimized builds: the ceiling and hubd are measured as they would ship.
build_flags=("${HUB_BAZEL_FLAGS[@]}" -c opt)
echo "run.sh: building (-c opt)" >&2
bazel build "${build_flags[@]}" //tools/hubbench:hubbench //tools/hubbench:noop_server \
  //tools/hubbench:failover
have_hub=1
bazel build "${build_flags[@]}" //hub:hubd || have_hub=0
# Copies: another build (--config=asan) may repoint bazel-bin while we run.
bin="$work/bin"
mkdir -p "$bin"
bazel_bin="$(bazel info "${build_flags[@]}" bazel-bin 2>/dev/null)"
cp "$bazel_bin/tools/hubbench/hubbench" "$bazel_bin/tools/hubbench/noop_server" \
  "$bazel_bin/tools/hubbench/failover" "$bin/"
if ((have_hub)); then cp "$bazel_bin/hub/hubd" "$bin/"; fi
if [[ -n "$ab" ]]; then
  cp "${ab%%,*}" "$bin/hubd_A"
  cp "${ab#*,}" "$bin/hubd_B"
fi
command -v etcd >/dev/null || { echo "run.sh: etcd missing: run tools/setup.sh" >&2; exit 1; }

# 10,000 connections need as many descriptors in the client and the server.
ulimit -n "$(ulimit -Hn)"
idle_streams=10000
((quick)) && idle_streams=1000
results="$work/results.jsonl"
: >"$results"
started=0
echo "run.sh: $(date -u '+%F %T') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "duration $duration, idle window $idle_window, repeat $repeat" >&2
for ((round = 1; round <= repeat; round++)); do
  echo "run.sh: round $round of $repeat" >&2
  for n in 1 16 64; do row register "c$n" --clients="$n"; done
  for layout in 1/1 64/64 1000/64 1000/1000; do
    row heartbeat "s${layout%/*}/c${layout#*/}" \
      --streams="${layout%/*}" --connections="${layout#*/}"
  done
  for conns in 64 "$idle_streams"; do
    row idle "s$idle_streams/c$conns" --streams="$idle_streams" --connections="$conns"
  done
  row cas distinct/c16 --clients=16 --keys=distinct
  row cas one/c16 --clients=16 --keys=one
  for n in 1 64; do
    row publish "agent/c$n" --clients="$n" --to=agent
    row publish "topicx10/c$n" --clients="$n" --to=topic --fanout=10
    row publish "role/c$n" --clients="$n" --to=role
  done
  failover_row
done
echo "run.sh: done $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
[[ -n "$out" ]] && cp "$results" "$out"
python3 tools/hubbench/report.py "$results"
((have_hub)) || echo "run.sh: //hub:hubd did not build: no hub figures" >&2
