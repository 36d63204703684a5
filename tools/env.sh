# Shared settings for the scripts in tools/ (sourced, not run).
# HUB_CACHE_DIR holds everything downloaded or cached outside the checkout:
# npm tools and Bazel's disk cache.
HUB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HUB_CACHE_DIR="${HUB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hub}"
HUB_BUF_VERSION="1.75.0"
HUB_BUF="$HUB_CACHE_DIR/tools/node_modules/@bufbuild/buf-linux-x64/bin/buf"
# The Node.js client's npm dependencies (clients/node/package-lock.json),
# installed by setup.sh outside the checkout; node finds them via NODE_PATH.
HUB_NODE_MODULES="$HUB_CACHE_DIR/node-client/node_modules"
# hub-mcp's npm dependencies (clients/mcp/package-lock.json: the MCP SDK and
# the Node.js client's gRPC libraries), installed the same way.
HUB_MCP_MODULES="$HUB_CACHE_DIR/mcp/node_modules"
# The console's browser test's npm dependency (tests/console/package-lock.json:
# puppeteer-core, which drives Debian's chromium; no browser download).
HUB_CONSOLE_MODULES="$HUB_CACHE_DIR/console-test/node_modules"
# tools/hubbench/jobs.sh's reference queues (tools/hubbench/queues/
# package-lock.json: pg-boss and graphile-worker), installed the same way.
HUB_QUEUES_MODULES="$HUB_CACHE_DIR/hubbench-queues/node_modules"
# The real agent CLIs (Claude Code, Codex, Gemini CLI) hub-mcp's install test
# runs (clients/mcp/test/clis/package-lock.json): their bin directory.
HUB_AGENT_CLIS="$HUB_CACHE_DIR/agent-clis/node_modules/.bin"
HUB_BAZEL_FLAGS=(--disk_cache="$HUB_CACHE_DIR/bazel-disk")
# hub_usage SCRIPT: print SCRIPT's header (every comment line after the
# shebang, up to its `set -euo pipefail`) to stderr, as its usage text.
hub_usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$1" >&2; }
export HUB_ROOT HUB_CACHE_DIR HUB_BUF HUB_NODE_MODULES HUB_MCP_MODULES HUB_CONSOLE_MODULES HUB_QUEUES_MODULES HUB_AGENT_CLIS
