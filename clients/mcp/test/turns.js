'use strict';
// What the whole-turn tests (claude_turn.test.js, cli_turns.test.js) share:
// the real CLIs from $HUB_AGENT_CLIS, `hub-mcp install` into a temporary
// HOME, and a loopback HTTP server that records what a CLI sends its model.
const fs = require('fs');
const http = require('http');
const path = require('path');
const { execFile, spawn } = require('child_process');
const { Hubd, freshDbPath, HubClient, startMcp, attached, BIN } = require('./harness');

const CLIS = process.env.HUB_AGENT_CLIS;
const skip = !CLIS || !fs.existsSync(path.join(CLIS, 'claude')) ? 'HUB_AGENT_CLIS is not set (tools/setup.sh installs the CLIs)' : false;

/** Every string inside `value` (the texts of a request's messages). */
function texts(value, out = []) {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) texts(v, out);
  else if (value && typeof value === 'object') for (const v of Object.values(value)) texts(v, out);
  return out;
}

/** `hub-mcp install --client=CLIENT --scope=user --hub=HUB` with HOME=home; resolves {code, out}. */
function installUser(client, { home, cwd, hub }) {
  return new Promise((resolve) => execFile(BIN, ['install', `--client=${client}`, '--scope=user', `--hub=${hub}`],
    { cwd, env: { PATH: process.env.PATH, HOME: home, HUB_MCP_MODULES: process.env.HUB_MCP_MODULES } },
    (error, stdout, stderr) => resolve({ code: error ? error.code : 0, out: stdout + stderr })));
}

/**
 * Runs the CLI `name` of $HUB_AGENT_CLIS with HOME=home and `env`, killed
 * after timeoutMs; resolves {code, signal, stdout, stderr, pid}.
 */
function runCli(name, args, { home, cwd, env, timeoutMs, onSpawn = () => {} }) {
  return new Promise((resolve) => {
    const p = spawn(path.join(CLIS, name), args, { cwd, env: { PATH: process.env.PATH, HOME: home,
      TERM: 'dumb', NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    onSpawn(p.pid);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (c) => { stdout += c; });
    p.stderr.on('data', (c) => { stderr += c; });
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, pid: p.pid });
    });
  });
}

/**
 * An HTTP server on 127.0.0.1 that records every request ({method, url,
 * body (parsed JSON, else null), raw}) and lets `handle(req, body, res)`
 * answer it. TURN_DUMP=/some/prefix keeps each request body for a look by
 * hand. Resolves {requests, url, close}.
 */
function recordingServer(handle) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      let body = null;
      try { body = raw ? JSON.parse(raw) : null; } catch (_) { /* recorded raw */ }
      requests.push({ method: req.method, url: req.url, body, raw });
      if (process.env.TURN_DUMP) fs.writeFileSync(`${process.env.TURN_DUMP}.${requests.length}.json`, raw);
      handle(req, body, res);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    requests, url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  })));
}

/**
 * What a turn starts with: a real hubd, agent B (a hub-mcp over the SDK's
 * Client) attached, and a handoff (priority 7, `text`) from B pending for A.
 * Resolves {hubd, hub, b, pendingId, close}.
 */
async function turnFixture(name, { a, b: bId, text }) {
  const hubd = await Hubd.start({ dbPath: freshDbPath(name) });
  const hub = new HubClient(hubd.address);
  let b;
  const close = async () => {
    if (b) await b.close();
    hub.close();
    await hubd.stop();
  };
  try {
    b = await startMcp({ hub: hubd.address, agentId: bId });
    await attached(b);
    const sent = await b.call('hub_send', { to: a, text, type: 'handoff', priority: 7, ttl_seconds: 3600 });
    if (sent.isError) throw new Error(`B's hub_send failed: ${JSON.stringify(sent)}`);
    return { hubd, hub, b, pendingId: sent.structuredContent.message_id, close };
  } catch (e) {
    await close();
    throw e;
  }
}

module.exports = { CLIS, skip, texts, installUser, runCli, recordingServer, turnFixture };
