#!/usr/bin/env bash
# What one operation costs the server, rather than how many it does: runs a
# hubbench workload against a fresh hubd and reads hubd's CPU time and
# context switches from /proc before and after the measured window. On a
# machine shared with other work, throughput moves with the neighbours while
# CPU per operation mostly does not, so this is the figure to compare two
# builds side by side (run both in one sitting, alternating).
#
#   tools/hubbench/cpu_per_op.sh HUBD HUBBENCH WORKLOAD [hubbench flags...]
#
# e.g. tools/hubbench/cpu_per_op.sh bazel-bin/hub/hubd \
#        bazel-bin/tools/hubbench/hubbench register --clients=64
# Prints the hubbench result line, then hubd's CPU µs/op (user, system) and
# context switches/op over every thread. Extra hubd flags: $HUBD_FLAGS.
set -euo pipefail
if (($# < 3)); then
  sed -n '2,15s/^# \{0,1\}//p' "$0" >&2
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

# shellcheck disable=SC2086  # HUBD_FLAGS is a list of flags
"$hubd" --listen=127.0.0.1:0 --db="$work/hub.sqlite" ${HUBD_FLAGS:-} \
  >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do
  grep -q "serving on" "$work/out" 2>/dev/null && break
  sleep 0.1
done
addr="$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$work/out")"
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
"$hubbench" "$workload" --target=hub --addr="$addr" --duration=1s "$@" >/dev/null
read -r ticks0 switches0 <<<"$(snapshot)"
line="$("$hubbench" "$workload" --target=hub --addr="$addr" --duration=3s "$@")"
read -r ticks1 switches1 <<<"$(snapshot)"
echo "$line"
python3 - "$line" "$ticks0" "$ticks1" "$switches0" "$switches1" \
  "$(getconf CLK_TCK)" <<'EOF'
import json
import sys

line, t0, t1, s0, s1, hz = sys.argv[1:]
ops = json.loads(line).get("ops") or 0
if not ops:
    sys.exit("no operations measured")
# The warm-up before hubbench's window is counted too: the figures are per
# operation of the window, slightly high by the warm-up's share.
cpu_us = (int(t1) - int(t0)) * 1e6 / int(hz) / ops
print(f"hubd: {cpu_us:.1f} us CPU/op, {(int(s1) - int(s0)) / ops:.2f} "
      f"context switches/op over {ops} ops")
EOF
