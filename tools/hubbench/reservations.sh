#!/usr/bin/env bash
# Path reservation benchmarks (issue 19; docs/BENCHMARKS.md,
# "Path reservations and the pre-commit hook"), on this machine, every server
# fresh for each row:
#
#   1. lock round trips/s at 16 and 64 clients, each client on a lock of its
#      own: hubd Reserve + ReleaseReservation of one path, etcd 3.4 v3lock
#      Lock + Unlock (what clientv3's concurrency.Mutex does through the lock
#      service), the no-op ceiling two echoes (hubbench lock);
#   2. the cost of a check of --paths staged files (shared mode, literal
#      paths) against 1,000, 10,000 and 100,000 live reservations
#      (reservation_check), and the whole pre-commit hook's command, `hubctl
#      reservations check --literal` with 1,000 paths, against 10,000, beside
#      a hubctl that only starts and one that checks a single path;
#   3. a one-path check in a project with 1,000 `**`-leading patterns.
#
#   tools/hubbench/reservations.sh [--duration=3s] [--calls=200] [--out=FILE]
#
# Prints one JSON line per row on stdout. Needs tools/setup.sh (etcd).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$HUB_ROOT"

duration=3s
calls=200
out=""
for arg in "$@"; do
  case "$arg" in
    --duration=*) duration="${arg#*=}" ;;
    --calls=*) calls="${arg#*=}" ;;
    --out=*) out="${arg#*=}" ;;
    *) hub_usage "$0"; exit 64 ;;
  esac
done

work="$(mktemp -d -t hubbench-resv.XXXXXX)"
server_pid=""
stop_server() {
  [[ -n "$server_pid" ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() {  # wait_for PID CHECK-COMMAND...: bounded (20 s)
  local pid="$1"
  shift
  for _ in $(seq 200); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

started=0
start_server() {  # start_server noop|hub|etcd [hubd flags...]
  local target="$1"
  shift
  local dir="$work/$target.$((++started))"
  mkdir -p "$dir"
  case "$target" in
    noop)
      "$bin/noop_server" --listen=127.0.0.1:0 >"$dir/out" 2>"$dir/err" &
      server_pid=$!
      wait_for "$server_pid" grep -q "serving on" "$dir/out"
      server_addr="$(sed -n 's/.*serving on \([^ ]*\).*/\1/p' "$dir/out")"
      ;;
    hub)
      "$bin/hubd" --listen=127.0.0.1:0 --db="$dir/hub.sqlite" "$@" \
        >"$dir/out" 2>"$dir/err" &
      server_pid=$!
      wait_for "$server_pid" grep -q "serving on" "$dir/out"
      server_addr="$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$dir/out")"
      ;;
    etcd)
      local client peer
      read -r client peer <<<"$(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')"
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
        --endpoints="$server_addr" endpoint health
      ;;
  esac
}

emit() {
  echo "$1"
  [[ -z "$out" ]] || echo "$1" >>"$out"
}

build_flags=("${HUB_BAZEL_FLAGS[@]}" -c opt)
echo "reservations.sh: building (-c opt)" >&2
bazel build "${build_flags[@]}" //tools/hubbench:hubbench \
  //tools/hubbench:noop_server //tools/hubbench:reservation_check //hub:hubd \
  //tools/hubctl >&2
bin="$work/bin"
mkdir -p "$bin"
bazel_bin="$(bazel info "${build_flags[@]}" bazel-bin 2>/dev/null)"
cp "$bazel_bin/tools/hubbench/hubbench" "$bazel_bin/tools/hubbench/noop_server" \
  "$bazel_bin/tools/hubbench/reservation_check" "$bazel_bin/hub/hubd" \
  "$bazel_bin/tools/hubctl/hubctl" "$bin/"
command -v etcd >/dev/null || { echo "reservations.sh: etcd missing: run tools/setup.sh" >&2; exit 1; }
echo "reservations.sh: $(date -u '+%F %T') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

for clients in 16 64; do
  for target in hub etcd noop; do
    start_server "$target"
    emit "$("$bin/hubbench" lock --target="$target" --addr="$server_addr" \
      --clients="$clients" --duration="$duration" --run_id=resv0001)"
    stop_server
  done
done

for n in 1000 10000 100000; do
  start_server hub --max_reservations_per_agent=0
  emit "$("$bin/reservation_check" --addr="$server_addr" --reservations="$n" \
    --calls="$calls")"
  if [[ "$n" == 10000 ]]; then
    # The hook's own command: a hubctl process per commit, 1,000 paths; and
    # where its time goes: a hubctl that only starts (--help: no channel,
    # no call), one that checks one path (start, connect, one small call).
    python3 - "$bin/hubctl" "$server_addr" <<'PY' | while read -r line; do emit "$line"; done
import json, subprocess, sys, time
hubctl, addr = sys.argv[1], sys.argv[2]
paths = ["d%d/d%d/new%d.cc" % (i % 100, (i // 7) % 100, i) for i in range(1000)]
check = [hubctl, "--addr=" + addr, "reservations", "check", "--literal",
         "--project=prj_hbCHECKBENCH0000000000"]
def run(workload, argv, n_paths, ok=(0, 9)):
    ms = []
    for _ in range(50):
        start = time.monotonic()
        r = subprocess.run(argv, capture_output=True)
        ms.append((time.monotonic() - start) * 1000)
        if r.returncode not in ok:
            sys.exit("hubctl failed: " + r.stderr.decode())
    ms.sort()
    print(json.dumps({"workload": workload, "reservations": 10000,
                      "paths": n_paths, "runs": len(ms),
                      "p50_ms": round(ms[25], 1), "p99_ms": round(ms[-1], 1)}))
run("hubctl_check", check + paths, 1000)
run("hubctl_start_only", [hubctl, "--help"], 0, ok=(0, 64))
run("hubctl_check", check + paths[:1], 1)
PY
  fi
  stop_server
done

# A project with 1,000 `**`-leading (shared) patterns beside 10,000 shared
# files: a one-path shared check, which reads exclusive rows only.
start_server hub --max_reservations_per_agent=0 --max_reservations_per_project=0
emit "$("$bin/reservation_check" --addr="$server_addr" --reservations=10000 \
  --globbed=1000 --paths=1 --calls="$calls")"
stop_server
