#!/usr/bin/env bash
# Longer fuzzing for release checks: builds every libFuzzer target under
# --config=fuzz (clang 14, ASan + UBSan) and fuzzes each for SECONDS (default
# 600) with a persistent working corpus in $HUB_CACHE_DIR/fuzz/<target>,
# seeded from tests/fuzz/<corpus>/.
#
#   tools/fuzz.sh [SECONDS] [TARGET...]     e.g. tools/fuzz.sh 3600 role_key_fuzz
#
# A crash, leak or timeout leaves its input in $HUB_CACHE_DIR/fuzz/artifacts/
# and makes the script fail. Turn every one into a regression test: copy the
# input into tests/fuzz/<corpus>/ (the plain build replays it as a test) and
# add a unit test for the fixed behaviour next to the code.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$HUB_ROOT"

seconds="${1:-600}"
shift || true
declare -A corpus_of=(
  [role_key_fuzz]=role_key
  [transport_locator_fuzz]=transport_locator
  [rpc_request_fuzz]=rpc_request
  [path_pattern_fuzz]=path_pattern
)
targets=("$@")
((${#targets[@]})) || targets=("${!corpus_of[@]}")

labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:$t"); done
bazel build "${HUB_BAZEL_FLAGS[@]}" --config=fuzz "${labels[@]}"
bin="$(bazel info "${HUB_BAZEL_FLAGS[@]}" --config=fuzz bazel-bin)"

artifacts="$HUB_CACHE_DIR/fuzz/artifacts"
mkdir -p "$artifacts"
status=0
for t in "${targets[@]}"; do
  work="$HUB_CACHE_DIR/fuzz/$t"
  mkdir -p "$work"
  echo "== $t: ${seconds}s, corpus $work + tests/fuzz/${corpus_of[$t]}"
  if ! TEST_TMPDIR="$(mktemp -d)" HUB_FUZZ_SECONDS="$seconds" \
    HUB_FUZZ_CORPUS_OUT="$work" "$bin/tests/fuzz/$t" \
    -rss_limit_mb=4096 -artifact_prefix="$artifacts/$t-" \
    "tests/fuzz/${corpus_of[$t]}"; then
    echo "== $t: FAILED (inputs in $artifacts)"
    status=1
  fi
done
exit $status
