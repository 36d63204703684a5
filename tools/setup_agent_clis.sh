#!/usr/bin/env bash
# Installs the real agent CLIs that hub-mcp's tests drive (Claude Code, Codex,
# Gemini CLI; clients/mcp/test/clis/package-lock.json pins them) from npm into
# $HUB_CACHE_DIR/agent-clis, outside the checkout, idempotently: about 900 MB
# the first time, redone only when the lockfile changes. Only the tests need
# them (tools/test.sh runs this after setup.sh); running hub does not.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

# Install scripts are not run, except Claude Code's own, which links its
# native binary from the platform package npm installed.
clis_dir="$HUB_CACHE_DIR/agent-clis"
clis_lock="$HUB_ROOT/clients/mcp/test/clis/package-lock.json"
if ! cmp -s "$clis_lock" "$clis_dir/package-lock.json" ||
  [[ ! -x "$HUB_AGENT_CLIS/claude" || $(stat -c %s "$clis_dir/node_modules/@anthropic-ai/claude-code/bin/claude.exe" 2>/dev/null || echo 0) -lt 100000 || ! -x "$HUB_AGENT_CLIS/codex" || ! -x "$HUB_AGENT_CLIS/gemini" ]]; then
  echo "setup: installing the agent CLIs (claude, codex, gemini) from npm into $clis_dir"
  mkdir -p "$clis_dir"
  cp "$HUB_ROOT/clients/mcp/test/clis/package.json" "$clis_lock" "$clis_dir/"
  npm ci --silent --no-audit --no-fund --ignore-scripts --prefix "$clis_dir" >/dev/null
  (cd "$clis_dir/node_modules/@anthropic-ai/claude-code" && node install.cjs >/dev/null)
fi
