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

// The tool_use blocks of an Anthropic request's assistant messages, and the
// tool_result of one of them.
function toolUses(body) {
  const uses = [];
  for (const m of body.messages || []) {
    if (m.role !== 'assistant' || !Array.isArray(m.content)) continue;
    for (const c of m.content) if (c.type === 'tool_use') uses.push(c);
  }
  return uses;
}

function toolResult(body, id) {
  for (const m of body.messages || []) {
    if (m.role !== 'user' || !Array.isArray(m.content)) continue;
    const r = m.content.find((c) => c.type === 'tool_result' && c.tool_use_id === id);
    if (r) return r;
  }
  return null;
}

/**
 * A scripted model behind Anthropic's Messages API (what Claude Code calls
 * with ANTHROPIC_BASE_URL), streamed (SSE) or not, on a recordingServer.
 * `script(body)` answers a request that offers tools with {tool: {name,
 * input}} or {text}; `beforeAnswer(body)` runs first (it may wait for what
 * the test needs). A request without tools (a side request) gets "ok";
 * count_tokens and /v1/models answer too. Resolves like recordingServer.
 */
function anthropicModel(script, beforeAnswer = async () => {}) {
  let seq = 0;
  return recordingServer(async (req, body, res) => {
    const json = (code, value) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const url = req.url.split('?')[0];
    if (req.method === 'POST' && url === '/v1/messages/count_tokens') return json(200, { input_tokens: 100 });
    if (req.method === 'GET' && url.startsWith('/v1/models')) {
      return json(200, { data: [], has_more: false, first_id: null, last_id: null });
    }
    if (req.method === 'HEAD') { res.writeHead(200); return res.end(); }
    if (!(req.method === 'POST' && url === '/v1/messages' && body)) {
      return json(404, { type: 'error', error: { type: 'not_found_error', message: `no ${req.method} ${url} here` } });
    }
    if ((body.tools || []).length) await beforeAnswer(body).catch(() => {});
    const step = (body.tools || []).length ? await script(body) : { text: 'ok' };
    seq += 1;
    const id = `msg_turn${seq}`;
    const block = step.tool
      ? { type: 'tool_use', id: `toolu_turn${seq}`, name: step.tool.name, input: step.tool.input }
      : { type: 'text', text: step.text };
    const stop = step.tool ? 'tool_use' : 'end_turn';
    const usage = { input_tokens: 100, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    if (!body.stream) {
      return json(200, { id, type: 'message', role: 'assistant', model: body.model, content: [block],
        stop_reason: stop, stop_sequence: null, usage });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    event('message_start', { message: { id, type: 'message', role: 'assistant', model: body.model, content: [],
      stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
    if (step.tool) {
      event('content_block_start', { index: 0, content_block: { ...block, input: {} } });
      const args = JSON.stringify(block.input);
      const cut = Math.floor(args.length / 2);
      for (const part of [args.slice(0, cut), args.slice(cut)]) {
        event('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: part } });
      }
    } else {
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: block.text } });
    }
    event('content_block_stop', { index: 0 });
    event('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 10 } });
    event('message_stop', {});
    return res.end();
  });
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

module.exports = { CLIS, skip, texts, installUser, runCli, recordingServer, anthropicModel, toolUses, toolResult, turnFixture };
