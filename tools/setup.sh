#!/usr/bin/env bash
# Installs what hub needs to build, run and test, idempotently, and says what
# it installs. Debian bookworm, as root (or with sudo). Nothing is installed
# when everything is already there.
#
#   apt: Bazel (offline, Debian's bazel-bootstrap), gRPC/protobuf/Abseil/SQLite
#        development packages, GoogleTest/Benchmark, clang-format, Node.js,
#        tmux (the tmux transport adapter and its tests), chromium (the
#        console's browser test), clang 14 with
#        libclang-rt-14-dev (libFuzzer, --config=fuzz), openssl (the TLS
#        tests' throw-away certificates), etcd 3.4 (server,
#        client and .proto files: tools/hubbench's reference).
#        Python's gRPC runtime (clients/python; stubs come from Debian's
#        protoc and grpc_python_plugin).
#   apt (storage/pg): libpq-dev, and postgresql-15 for the servers the
#        PostgreSQL tests start themselves (initdb/pg_ctl, no service).
#   npm: buf (lint and `buf curl`) into $HUB_CACHE_DIR/tools, and the Node.js
#        client's dependencies (@grpc/grpc-js, @grpc/proto-loader, exactly as
#        clients/node/package-lock.json pins them) into
#        $HUB_CACHE_DIR/node-client, and hub-mcp's (clients/mcp/package-lock.json)
#        into $HUB_CACHE_DIR/mcp, and the console browser test's puppeteer-core
#        (tests/console/package-lock.json) into $HUB_CACHE_DIR/console-test,
#        and tools/hubbench/jobs.sh's reference queues (pg-boss,
#        graphile-worker: tools/hubbench/queues/package-lock.json) into
#        $HUB_CACHE_DIR/hubbench-queues, all outside the checkout. The agent CLIs
#        that only the tests need come from tools/setup_agent_clis.sh.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

APT_PACKAGES=(
  # build
  bazel-bootstrap bazel-rules-java
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev grpc-proto
  libabsl-dev libsqlite3-dev libssl-dev nlohmann-json3-dev
  libpq-dev postgresql-15  # storage/pg: libpq, and a server the tests start
  libspdlog-dev libcpp-httplib-dev  # hubd's logs and its /metrics endpoint
  golang-github-gogo-googleapis-dev  # google/rpc/{status,error_details}.proto
  googletest libgtest-dev libbenchmark-dev
  # tools/hubbench: etcd 3.4 as a reference, and its .proto files for codegen
  etcd-server etcd-client golang-etcd-server-dev
  # checks and tools
  clang-format sqlite3
  clang-14 libclang-rt-14-dev  # --config=fuzz: libFuzzer, ASan/UBSan runtimes
  jq  # docs/api.md's examples (run by //tests:e2e_api_doc_test)
  tmux  # the tmux transport adapter and its tests
  chromium  # the console's browser test (headless, driven by puppeteer-core)
  openssl  # throw-away CA and certificates for the TLS tests (tests/make_test_pki.sh)
  # clients/python and tests/e2e/hubctl_test.py: gRPC and protobuf
  # runtimes for /usr/bin/python3
  python3-grpcio python3-protobuf
)
# Commands that may come from elsewhere than Debian's packages (the machine's
# own Node.js, say): installed from apt only when the command is missing.
declare -A APT_FOR_COMMAND=([npm]="nodejs npm" [/usr/bin/python3]="python3")

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
for cmd in "${!APT_FOR_COMMAND[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=(${APT_FOR_COMMAND[$cmd]})
done
if ((${#missing[@]})); then
  echo "setup: installing apt packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -x "$HUB_BUF" ]] || [[ "$("$HUB_BUF" --version 2>/dev/null)" != "$HUB_BUF_VERSION" ]]; then
  echo "setup: installing buf $HUB_BUF_VERSION from npm into $HUB_CACHE_DIR/tools"
  mkdir -p "$HUB_CACHE_DIR/tools"
  npm install --silent --no-audit --no-fund --prefix "$HUB_CACHE_DIR/tools" \
    "@bufbuild/buf@$HUB_BUF_VERSION" >/dev/null
fi
"$HUB_BUF" --version >/dev/null

# npm_ci_copy WHAT SOURCE TARGET MARKER...: `npm ci` of SOURCE's lockfile
# (SOURCE relative to the checkout) in a copy at TARGET, outside the checkout,
# redone only when the lockfile changes or a MARKER (relative to
# TARGET/node_modules) is missing.
npm_ci_copy() {
  local what="$1" source="$HUB_ROOT/$2" target="$3"
  shift 3
  local stale=0 marker
  cmp -s "$source/package-lock.json" "$target/package-lock.json" || stale=1
  for marker in "$@"; do
    [[ -f "$target/node_modules/$marker" ]] || stale=1
  done
  if ((stale)); then
    echo "setup: installing $what into $target"
    mkdir -p "$target"
    cp "$source/package.json" "$source/package-lock.json" "$target/"
    npm ci --silent --no-audit --no-fund --ignore-scripts --prefix "$target" >/dev/null
  fi
}

# The Node.js client's dependencies (node finds them via NODE_PATH), and
# hub-mcp's (the MCP SDK, and the client's gRPC libraries again).
npm_ci_copy "the Node.js client's npm dependencies" clients/node \
  "$HUB_CACHE_DIR/node-client" @grpc/grpc-js/package.json \
  @grpc/proto-loader/package.json
npm_ci_copy "hub-mcp's npm dependencies" clients/mcp "$HUB_CACHE_DIR/mcp" \
  @modelcontextprotocol/sdk/package.json @grpc/grpc-js/package.json
# The console's browser test: puppeteer-core only (it drives Debian's
# chromium; --ignore-scripts keeps it from downloading a browser).
npm_ci_copy "the console browser test's npm dependencies" tests/console \
  "$HUB_CACHE_DIR/console-test" puppeteer-core/package.json
# tools/hubbench/jobs.sh: pg-boss and graphile-worker (and their pg driver).
npm_ci_copy "jobs.sh's reference queues (pg-boss, graphile-worker)" tools/hubbench/queues \
  "$HUB_CACHE_DIR/hubbench-queues" pg-boss/package.json graphile-worker/package.json
