#!/bin/sh
# Runs hub-mcp's Node tests under Bazel with the Node client's runner
# (clients/node/test/run_node_tests.py: TAP -> one JUnit case per test).
# Needs HUB_MCP_MODULES (tools/test.sh passes it with --test_env): hub-mcp's
# dependencies include the client's gRPC libraries, so the runner is given
# them as its HUB_NODE_MODULES.
if [ -z "$HUB_MCP_MODULES" ] || [ ! -d "$HUB_MCP_MODULES/@modelcontextprotocol/sdk" ]; then
  echo "HUB_MCP_MODULES must name the node_modules directory tools/setup.sh fills" \
    "(got '$HUB_MCP_MODULES'); pass --test_env=HUB_MCP_MODULES=... as tools/test.sh does" >&2
  exit 1
fi
runner=$1
shift
HUB_NODE_MODULES=$HUB_MCP_MODULES exec /usr/bin/python3 "$runner" "$@"
