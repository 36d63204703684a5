#!/usr/bin/env bash
# Sets everything up, builds hubd and runs it in the foreground on an embedded
# SQLite database. Extra arguments go to hubd (try --help).
#   defaults: --listen=127.0.0.1:27889 --db=var/hub.sqlite
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$HUB_ROOT/tools/setup.sh"
cd "$HUB_ROOT"
bazel build "${HUB_BAZEL_FLAGS[@]}" //hub:hubd
exec "$HUB_ROOT/bazel-bin/hub/hubd" "$@"
