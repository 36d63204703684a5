#!/usr/bin/env bash
# Reconnect benchmark (issue 16 §5): PresenceSessions (default 1,000 on 64
# channels) attached to hubd, which is SIGKILLed, kept down for --downtime
# and restarted on the same address and database; the time from its
# "serving on" line to every session attached again (p50/p99/max over all
# sessions of all rounds). See reconnect_main.cc and docs/BENCHMARKS.md,
# "Reconnecting to a restarted hub".
#
#   tools/hubbench/reconnect.sh [--before=BINARY] [--repeat=3] [--rounds=3]
#                               [--sessions=1000] [--channels=64]
#                               [--downtime=1s] [--out=FILE]
#
#   --before   a reconnect binary built against an older client library: it
#              runs in turn with this tree's (before, after, before, ...), on
#              the same hubd binary, and the table shows both and after/before.
#   --repeat   runs of each binary; the table shows the medians of the runs.
#   --rounds   kill + restart cycles per run.
#   --out      also keep the JSON result lines in FILE.
#
# Builds hubd and the benchmark with -c opt. Each run starts its own hubd on
# a fresh database and stops it at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$HUB_ROOT"

before=""
repeat=3
bench_flags=()
out=""
for arg in "$@"; do
  case "$arg" in
    --before=*) before="$(realpath "${arg#*=}")" ;;
    --repeat=*) repeat="${arg#*=}" ;;
    --rounds=* | --sessions=* | --channels=* | --downtime=*) bench_flags+=("$arg") ;;
    --out=*) out="${arg#*=}" ;;
    *) hub_usage "$0"; exit 64 ;;
  esac
done

work="$(mktemp -d -t reconnect.XXXXXX)"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

build_flags=("${HUB_BAZEL_FLAGS[@]}" -c opt)
echo "reconnect.sh: building (-c opt)" >&2
bazel build "${build_flags[@]}" //hub:hubd //tools/hubbench:reconnect
# Copies: another build may repoint bazel-bin while we run.
bazel_bin="$(bazel info "${build_flags[@]}" bazel-bin 2>/dev/null)"
cp "$bazel_bin/hub/hubd" "$bazel_bin/tools/hubbench/reconnect" "$work/"
[[ -z "$before" ]] || cp "$before" "$work/reconnect.before"

# 1,000 sessions: two threads and a stream each.
ulimit -n "$(ulimit -Hn)"
results="$work/results.jsonl"
echo "reconnect.sh: $(date -u '+%F %T') UTC, $(nproc) cores, load" \
  "$(cut -d' ' -f1-3 /proc/loadavg), repeat $repeat, ${bench_flags[*]:-defaults}" >&2
for ((run = 1; run <= repeat; run++)); do
  variants=(after)
  [[ -z "$before" ]] || variants=(before after)
  for variant in "${variants[@]}"; do
    binary="$work/reconnect"
    [[ "$variant" == before ]] && binary="$work/reconnect.before"
    line="$(TMPDIR="$work" "$binary" --hubd="$work/hubd" "${bench_flags[@]}" \
      2>>"$work/reconnect.err")" || true
    [[ -n "$line" ]] || line='{"status":"error","error":"reconnect failed"}'
    line="${line%\}},\"variant\":\"$variant\",\"run\":$run}"
    echo "$line" >>"$results"
    echo "  $line" >&2
  done
done
echo "reconnect.sh: done $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
[[ -n "$out" ]] && cp "$results" "$out"
grep -h "round" "$work/reconnect.err" | sed 's/^/  /' >&2 || true
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["variant"], []).append(r)
print("reconnect: serving -> every session attached again, ms (median of runs)")
print("%-8s %5s %9s %9s %9s" % ("", "runs", "p50", "p99", "max"))
med = {}
for v in ("before", "after"):
    if v not in by:
        continue
    ok = [r for r in by[v] if r.get("status") == "ok"]
    if not ok:
        print("%-8s %5d  all runs failed" % (v, len(by[v])))
        continue
    med[v] = {k: statistics.median(r[k] for r in ok) for k in ("p50_ms", "p99_ms", "max_ms")}
    print("%-8s %5d %9.0f %9.0f %9.0f" % (v, len(ok), med[v]["p50_ms"], med[v]["p99_ms"],
                                         med[v]["max_ms"]))
if "before" in med and "after" in med:
    print("%-8s %5s %8.2fx %8.2fx %8.2fx" % ("after/before", "", *(
        med["after"][k] / med["before"][k] for k in ("p50_ms", "p99_ms", "max_ms"))))
PY
