'use strict';
// The real CLIs read what `hub-mcp install` wrote (user scope, a temporary
// HOME): Claude Code connects to the server, Codex and Gemini CLI list it.
// Needs $HUB_AGENT_CLIS (tools/setup.sh installs the CLIs; tools/test.sh
// passes it); skipped without it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { execFile } = require('child_process');
const { apply, BIN } = require('../lib/install');
const { Hubd, freshDbPath, tmpDir, RUNTIME_DIR } = require('./harness');

const CLIS = process.env.HUB_AGENT_CLIS;
const skip = !CLIS || !fs.existsSync(path.join(CLIS, 'claude')) ? 'HUB_AGENT_CLIS is not set (tools/setup.sh installs the CLIs)' : false;

function run(cli, args, home, cwd) {
  return new Promise((resolve) => {
    const env = { PATH: process.env.PATH, HOME: home, HUB_MCP_RUNTIME_DIR: RUNTIME_DIR,
      HUB_MCP_MODULES: process.env.HUB_MCP_MODULES || '', TERM: 'dumb', NO_COLOR: '1' };
    execFile(path.join(CLIS, cli), args, { cwd, env, timeout: 90000 }, (error, stdout, stderr) =>
      resolve({ code: error ? error.code : 0, out: `${stdout}\n${stderr}` }));
  });
}

test('claude mcp list: hub Connected; codex and gemini mcp list show it', { skip }, async () => {
  const hubd = await Hubd.start({ dbPath: freshDbPath('clis') });
  try {
    const home = tmpDir('clis-home');
    const env = { HUB_MCP_MODULES: process.env.HUB_MCP_MODULES };
    for (const client of ['claude', 'codex', 'gemini']) {
      apply(true, { client, scope: 'user', hub: hubd.address, home, dir: home, env });
    }
    const claude = await run('claude', ['mcp', 'list'], home, home);
    assert.match(claude.out, new RegExp(`hub: ${BIN} serve --client=claude --hub=${hubd.address}.*Connected`), claude.out);
    const codex = await run('codex', ['mcp', 'list'], home, home);
    assert.match(codex.out, new RegExp(`hub\\s+${BIN}\\s+serve --client=codex --hub=${hubd.address}`), codex.out);
    const gemini = await run('gemini', ['mcp', 'list'], home, home);
    assert.match(gemini.out, new RegExp(`hub: ${BIN} serve --client=gemini --hub=${hubd.address}`), gemini.out);
  } finally {
    await hubd.stop();
  }
});
