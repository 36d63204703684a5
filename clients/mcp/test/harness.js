'use strict';
// Test harness: a real hubd (clients/node/test/hubd.js) and hub-mcp processes
// driven by the MCP SDK's own Client over StdioClientTransport.
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { Hubd, freshDbPath } = require('../../node/test/hubd');
const { HubClient } = require('../../node/lib/client');

const BIN = path.resolve(__dirname, '..', 'bin', 'hub-mcp');
const PROJECT = 'prj_MCPtestMCPtestMCPtestX';

function tmpDir(name) {
  return fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || os.tmpdir(), `hub-mcp-${name}-`));
}

// One runtime directory for every hub-mcp of this test process (the hook
// finds its server by the CLI's pid: this process).
const RUNTIME_DIR = tmpDir('run');

function baseEnv(extra = {}) {
  const env = { ...process.env, HUB_MCP_RUNTIME_DIR: RUNTIME_DIR, ...extra };
  for (const k of ['TMUX', 'TMUX_PANE', 'HUB_AGENT_ID', 'HUB_PROJECT_ID', 'CLAUDE_CODE_SESSION_ID']) {
    if (!(k in extra)) delete env[k];
  }
  return env;
}

/** A hub-mcp process with an MCP client connected to it. */
async function startMcp({ hub, agentId, project = PROJECT, args = [], env = {}, cli = 'claude' }) {
  const argv = ['serve', `--client=${cli}`, `--hub=${hub}`, ...args];
  if (agentId) argv.push(`--agent-id=${agentId}`);
  if (project) argv.push(`--project=${project}`);
  const transport = new StdioClientTransport({ command: BIN, args: argv, env: baseEnv(env), stderr: 'pipe' });
  let stderr = '';
  transport.stderr.on('data', (c) => { stderr += c.toString(); });
  const client = new Client({ name: 'hub-mcp-test', version: '1.0.0' });
  const notifications = [];
  await client.connect(transport);
  client.fallbackNotificationHandler = async (n) => { notifications.push(n); };
  const mcp = {
    client, transport, notifications, get pid() { return transport.pid; },
    get stderr() { return stderr; },
    call: (name, args = {}) => client.callTool({ name, arguments: args }),
    async close() { try { await client.close(); } catch (_) { /* gone */ } },
  };
  return mcp;
}

/** Waits until `probe()` resolves truthy (polled every 50 ms), or fails. */
async function waitFor(what, probe, timeoutMs = 60000) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await probe();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last && last.message ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function attached(mcp) {
  return waitFor('attached', async () => {
    const r = await mcp.call('hub_whoami');
    return r.structuredContent.attached ? r.structuredContent : null;
  });
}

/** Resolves when the process `pid` of `mcp` has exited. */
function exited(mcp) {
  const proc = mcp.transport._process;
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => proc.once('exit', resolve));
}

/**
 * Runs `hub-mcp hook --client=CLIENT --event=EVENT` with `input` (default
 * {session_id, hook_event_name}) on stdin; resolves {code, stdout, stderr, ms}.
 */
function runHook(event, env = {}, sessionId = 'test', { client = 'claude', input } = {}) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const p = spawn(BIN, ['hook', `--client=${client}`, `--event=${event}`], { env: baseEnv(env),
      stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (c) => { stdout += c; });
    p.stderr.on('data', (c) => { stderr += c; });
    p.stdin.on('error', () => {});
    p.stdin.end(JSON.stringify(input || { session_id: sessionId, hook_event_name: event }));
    p.on('close', (code) => resolve({ code, stdout, stderr,
      ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
  });
}

module.exports = { Hubd, freshDbPath, HubClient, startMcp, waitFor, attached, exited, runHook,
  tmpDir, BIN, PROJECT, RUNTIME_DIR };
