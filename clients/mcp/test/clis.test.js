'use strict';
// The real CLIs read what `hub-mcp install` wrote (user scope, a temporary
// HOME): Claude Code connects to the server, Codex and Gemini CLI list it,
// and Codex lists the hooks (untrusted until the user trusts them).
// Needs $HUB_AGENT_CLIS (tools/setup.sh installs the CLIs; tools/test.sh
// passes it); skipped without it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { execFile, spawn } = require('child_process');
const { apply, BIN } = require('../lib/install');
const { Hubd, freshDbPath, HubClient, tmpDir, RUNTIME_DIR } = require('./harness');

const CLIS = process.env.HUB_AGENT_CLIS;
const skip = !CLIS || !fs.existsSync(path.join(CLIS, 'claude')) ? 'HUB_AGENT_CLIS is not set (tools/setup.sh installs the CLIs)' : false;

function run(cli, args, home, cwd, extra = {}) {
  return new Promise((resolve) => {
    const env = { PATH: process.env.PATH, HOME: home, HUB_MCP_RUNTIME_DIR: RUNTIME_DIR,
      HUB_MCP_MODULES: process.env.HUB_MCP_MODULES || '', TERM: 'dumb', NO_COLOR: '1', ...extra };
    execFile(path.join(CLIS, cli), args, { cwd, env, timeout: 90000 }, (error, stdout, stderr) =>
      resolve({ code: error ? error.code : 0, out: `${stdout}\n${stderr}` }));
  });
}

test('claude mcp list: hub Connected; codex and gemini mcp list show it; no agent left behind', { skip }, async () => {
  const hubd = await Hubd.start({ dbPath: freshDbPath('clis') });
  const hub = new HubClient(hubd.address);
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
    // Claude Code and Gemini CLI started the server to check it (both say
    // Connected once it answers the handshake) and killed it: a health check
    // registers no agent, so none is listed, offline, ever after. A trusted
    // folder makes Gemini CLI start it too.
    const trusted = await run('gemini', ['mcp', 'list'], home, home, { GEMINI_CLI_TRUST_WORKSPACE: 'true' });
    assert.match(trusted.out, /hub: .*Connected/, trusted.out);
    const { agents } = await hub.presence.listAgents({ pageSize: 1000 });
    assert.deepEqual(agents.map((a) => `${a.agentId} ${a.status}`), []);
  } finally {
    hub.close();
    await hubd.stop();
  }
});

// Codex's own account of its hooks: `codex app-server` (JSON-RPC over stdio,
// one message a line), initialize then hooks/list for the project directory.
function codexHooks(home, cwd) {
  return new Promise((resolve, reject) => {
    const p = spawn(path.join(CLIS, 'codex'), ['app-server'], { cwd, stdio: ['pipe', 'pipe', 'ignore'],
      env: { PATH: process.env.PATH, HOME: home, TERM: 'dumb' } });
    const timer = setTimeout(() => { p.kill('SIGKILL'); reject(new Error('codex app-server did not answer')); }, 60000);
    const send = (m) => p.stdin.write(JSON.stringify(m) + '\n');
    let buf = '';
    p.stdout.on('data', (c) => {
      buf += c;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const m = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (m.id === 1) {
          send({ method: 'initialized' });
          send({ id: 2, method: 'hooks/list', params: { cwds: [cwd] } });
        } else if (m.id === 2) {
          clearTimeout(timer);
          p.kill();
          resolve(m.result || m);
        }
      }
    });
    send({ id: 1, method: 'initialize', params: { clientInfo: { name: 'hub-mcp-test', version: '1.0.0' } } });
  });
}

test('codex app-server hooks/list: the three hub-mcp hooks, from the user layer, not trusted yet', { skip }, async () => {
  const home = tmpDir('clis-codex-hooks');
  apply(true, { client: 'codex', scope: 'user', hub: '127.0.0.1:1', home, dir: home,
    env: { HUB_MCP_MODULES: process.env.HUB_MCP_MODULES } });
  const listed = await codexHooks(home, home);
  const hooks = listed.data[0].hooks.map((h) => [h.eventName, h.command, h.source, h.timeoutSec, h.trustStatus]).sort();
  assert.deepEqual(hooks, [
    ['postToolUse', `${BIN} hook --client=codex --event=PostToolUse`, 'user', 5, 'untrusted'],
    ['sessionStart', `${BIN} hook --client=codex --event=SessionStart`, 'user', 5, 'untrusted'],
    ['userPromptSubmit', `${BIN} hook --client=codex --event=UserPromptSubmit`, 'user', 5, 'untrusted'],
  ], JSON.stringify(listed));
});
