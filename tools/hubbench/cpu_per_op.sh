#!/usr/bin/env bash
# What one operation costs the server, rather than how many it does: runs a
# hubbench workload against a fresh hubd (or noop_server, when HUBD is a
# noop_server binary) and reads the server's CPU time and context switches
# from /proc before and after the measured window. On a machine shared with
# other work, throughput moves with the neighbours while CPU per operation
# mostly does not, so this is the figure to compare two builds side by side
# (run both in one sitting, alternating).
#
#   tools/hubbench/cpu_per_op.sh HUBD HUBBENCH WORKLOAD [hubbench flags...]
#
# e.g. tools/hubbench/cpu_per_op.sh bazel-bin/hub/hubd \
#        bazel-bin/tools/hubbench/hubbench register --clients=64
# Prints the hubbench result line, then the server's CPU µs/op and context
# switches/op over every thread, then CPU µs/op by thread name (threads that
# ended inside the window are not counted there). Extra server flags:
# $HUBD_FLAGS (also for noop_server, e.g. HUBD_FLAGS=--reply=relay). With
# NOOP_DURABLE=1 a noop_server writes every Unary call to a new SQLite file
# in the run's temporary directory (its --durable).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
if (($# < 3)); then
  hub_usage "$0"
  exit 64
fi
hubd="$1" hubbench="$2" workload="$3"
shift 3
work="$(mktemp -d -t cpu_per_op.XXXXXX)"
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

target=hub
server_flags=(--db="$work/hub.sqlite")
if [[ "$(basename "$hubd")" == noop_server ]]; then
  target=noop
  server_flags=()
  if [[ "${NOOP_DURABLE:-0}" == 1 ]]; then
    server_flags=(--durable="$work/noop.sqlite")
  fi
fi
# shellcheck disable=SC2086  # HUBD_FLAGS is a list of flags
"$hubd" --listen=127.0.0.1:0 "${server_flags[@]}" ${HUBD_FLAGS:-} \
  >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do
  grep -q "serving on" "$work/out" 2>/dev/null && break
  sleep 0.1
done
addr="$(sed -n 's/.*serving on \([^ ]*\).*/\1/p' "$work/out")"
[[ -n "$addr" ]] || { cat "$work/err" >&2; exit 1; }

# utime+stime (clock ticks) of the process, and the sum of every thread's
# voluntary and involuntary context switches.
snapshot() {
  local ticks switches
  ticks="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
  switches="$(cat /proc/"$pid"/task/*/status |
    awk '/ctxt_switches/ {s += $2} END {print s}')"
  echo "$ticks $switches"
}
# Each thread's id, name and utime+stime, a line each (a name may hold
# spaces: it is the text between the parentheses).
threads() {
  for stat in /proc/"$pid"/task/*/stat; do
    sed -n 's/^\([0-9]*\) (\(.*\)) \(.*\)$/\1\t\2\t\3/p' "$stat" 2>/dev/null |
      awk -F'\t' '{split($3, f, " "); print $1 "\t" $2 "\t" f[12] + f[13]}'
  done
}
"$hubbench" "$workload" --target="$target" --addr="$addr" --duration=1s "$@" \
  >/dev/null
read -r ticks0 switches0 <<<"$(snapshot)"
threads >"$work/threads0"
line="$("$hubbench" "$workload" --target="$target" --addr="$addr" \
  --duration=3s "$@")"
read -r ticks1 switches1 <<<"$(snapshot)"
threads >"$work/threads1"
echo "$line"
python3 - "$line" "$ticks0" "$ticks1" "$switches0" "$switches1" \
  "$(getconf CLK_TCK)" "$target" "$work/threads0" "$work/threads1" <<'EOF'
import collections
import json
import sys

line, t0, t1, s0, s1, hz, target, before, after = sys.argv[1:]
ops = json.loads(line).get("ops") or 0
if not ops:
    sys.exit("no operations measured")
# The warm-up before hubbench's window is counted too: the figures are per
# operation of the window, slightly high by the warm-up's share.
cpu_us = (int(t1) - int(t0)) * 1e6 / int(hz) / ops
server = "hubd" if target == "hub" else "noop_server"
print(f"{server}: {cpu_us:.1f} us CPU/op, {(int(s1) - int(s0)) / ops:.2f} "
      f"context switches/op over {ops} ops")


def ticks(path):
    by_tid = {}
    for row in open(path):
        tid, name, t = row.rstrip("\n").split("\t")
        by_tid[tid] = (name, int(t))
    return by_tid


start, end = ticks(before), ticks(after)
by_name = collections.Counter()
for tid, (name, t) in end.items():
    by_name[name] += t - start.get(tid, (name, 0))[1]
print("  by thread: " + ", ".join(
    f"{name} {t * 1e6 / int(hz) / ops:.1f}"
    for name, t in by_name.most_common() if t > 0))
EOF
