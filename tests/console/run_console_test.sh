#!/bin/sh
# Runs the console's browser test under Bazel with the Node client's runner
# (TAP -> one JUnit case per test). Needs HUB_CONSOLE_MODULES (puppeteer-core)
# and HUB_NODE_MODULES (the client's gRPC libraries), both passed by
# tools/test.sh with --test_env, and Debian's chromium (tools/setup.sh).
if [ -z "$HUB_CONSOLE_MODULES" ] || [ ! -d "$HUB_CONSOLE_MODULES/puppeteer-core" ]; then
  echo "HUB_CONSOLE_MODULES must name the node_modules directory tools/setup.sh" \
    "fills with puppeteer-core (got '$HUB_CONSOLE_MODULES'); pass" \
    "--test_env=HUB_CONSOLE_MODULES=... as tools/test.sh does" >&2
  exit 1
fi
if [ ! -x /usr/bin/chromium ]; then
  echo "/usr/bin/chromium is missing: run tools/setup.sh (apt package chromium)" >&2
  exit 1
fi
exec /usr/bin/python3 "$@"
