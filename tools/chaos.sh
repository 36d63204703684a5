#!/usr/bin/env bash
# Chaos run: hubd under mixed load (registrations, heartbeats, reservations,
# publishes, acks) from tools/chaos/chaos_driver, SIGKILLed at random moments
# (default 20 times). After every kill the driver checks that no acknowledged
# write is missing, that no role epoch was handed to two holders, that epochs
# never went back, and that `PRAGMA integrity_check` says ok; then it restarts
# hubd and goes on. Exit status 0 when every check passed.
#
#   tools/chaos.sh [--kills=20] [--workers=4] [--roles=4] [--seed=N]
#                  [--min_uptime=200ms] [--max_uptime=1200ms]
#
# From a checkout it builds hubd and the driver with Bazel; under `bazel
# test` (//tools/chaos:chaos_test) it uses $HUBD and $CHAOS_DRIVER. The work
# directory (database, hubd's logs) is kept in $CHAOS_DIR or a temporary
# directory, and removed after a passing run unless CHAOS_KEEP=1.
set -euo pipefail

if [[ -z "${HUBD:-}" || -z "${CHAOS_DRIVER:-}" ]]; then
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  source "$root/tools/env.sh"
  (cd "$root" && bazel build "${HUB_BAZEL_FLAGS[@]}" //hub:hubd //tools/chaos:chaos_driver >&2)
  bin="$(cd "$root" && bazel info bazel-bin 2>/dev/null)"
  HUBD="$bin/hub/hubd"
  CHAOS_DRIVER="$bin/tools/chaos/chaos_driver"
fi
command -v sqlite3 >/dev/null || { echo "chaos: the sqlite3 CLI is needed (apt install sqlite3)" >&2; exit 2; }

dir="${CHAOS_DIR:-$(mktemp -d "${TEST_TMPDIR:-/tmp}/hub-chaos.XXXXXX")}"
mkdir -p "$dir"
status=0
"$CHAOS_DRIVER" --hubd="$HUBD" --dir="$dir" "$@" || status=$?
if [[ $status -ne 0 ]]; then
  echo "chaos: FAILED (exit $status); database and hubd logs kept in $dir" >&2
  tail -n 20 "$dir/hubd.stderr" >&2 || true
elif [[ "${CHAOS_KEEP:-0}" != 1 && -z "${CHAOS_DIR:-}" ]]; then
  rm -rf "$dir"
fi
exit $status
