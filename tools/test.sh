#!/usr/bin/env bash
# Sets everything up and runs every test and check:
#   - formatting (clang-format, Google style) of all C++ sources
#   - buf lint (STANDARD) of the hub.v1 contracts
#   - bazel test //... : unit tests, in-process gRPC tests and end-to-end
#     tests that drive the real hubd with buf curl
#   - bazel test --config=asan //... : the same under ASan + UBSan + LSan
#     (clang), but for the suites tagged "plain_only": those drive hub-mcp,
#     the real agent CLIs, the console in a browser and the docs' examples,
#     whose hubd calls the in-process gRPC tests already run under the
#     sanitizers, so they run once, in the plain build
#   - bazel test --config=fuzz //tests/fuzz:all : a short libFuzzer run of
#     each fuzz target (HUB_FUZZ_SECONDS, default 5; tools/fuzz.sh runs long),
#     on the ASan build's objects: only the fuzz targets link again
#   - bazel test --config=tsan, tests tagged "concurrency" : ThreadSanitizer
# Ends with one line "N passed, N failed" (test cases plus checks).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$HUB_ROOT"

if ! tools/setup.sh || ! tools/setup_agent_clis.sh; then
  echo "setup failed"
  echo "0 passed, 1 failed"
  exit 1
fi

passed=0
failed=0
log_dir="$(mktemp -d)"
trap 'rm -rf "$log_dir"' EXIT

check() {  # check NAME COMMAND...: one pass or one failure
  local name="$1"
  shift
  if "$@" >"$log_dir/$name.log" 2>&1; then
    echo "check $name: passed"
    passed=$((passed + 1))
  else
    echo "check $name: FAILED"
    cat "$log_dir/$name.log"
    failed=$((failed + 1))
  fi
}

format_check() {
  git ls-files -z -- '*.cc' '*.h' | xargs -0 -r clang-format --dry-run -Werror
}

bazel_tests() {  # bazel_tests LABEL [bazel flags...]; targets: $targets or //...
  local label="$1"
  shift
  echo "== bazel test $* ${targets:-//...}"
  local status=0
  bazel test "${HUB_BAZEL_FLAGS[@]}" "$@" --keep_going \
    --test_env=HUB_BUF="$HUB_BUF" --test_env=HUB_NODE_MODULES="$HUB_NODE_MODULES" \
    --test_env=HUB_MCP_MODULES="$HUB_MCP_MODULES" \
    --test_env=HUB_CONSOLE_MODULES="$HUB_CONSOLE_MODULES" \
    --test_env=HUB_AGENT_CLIS="$HUB_AGENT_CLIS" ${targets:-//...} >"$log_dir/bazel-$label.log" 2>&1 ||
    status=$?
  grep -E '^(//|ERROR|FAIL|Executed|INFO: Build)' "$log_dir/bazel-$label.log" || true
  local counts
  counts=$(/usr/bin/python3 tools/count_tests.py "$log_dir/bazel-$label.log" \
    "$(bazel info "${HUB_BAZEL_FLAGS[@]}" "$@" bazel-testlogs 2>/dev/null)")
  # A package that does not load (a BUILD syntax error) drops its tests from
  # Bazel's list without a status line: Bazel's exit code is the only sign.
  if ((status != 0)) && [[ "${counts#* }" == 0 ]]; then
    echo "bazel test ($label): bazel exited $status with no failing test listed"
    counts="${counts% *} 1"
  fi
  echo "bazel test ($label): ${counts% *} passed, ${counts#* } failed"
  passed=$((passed + ${counts% *}))
  failed=$((failed + ${counts#* }))
}

check clang-format format_check
check buf-lint "$HUB_BUF" lint
bazel_tests default
bazel_tests asan --config=asan --build_tests_only --test_tag_filters=-plain_only
targets=//tests/fuzz:all bazel_tests fuzz --config=fuzz
bazel_tests tsan --config=tsan --build_tests_only --test_tag_filters=concurrency

echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
