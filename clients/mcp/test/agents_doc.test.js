'use strict';
// Runs docs/agents.md: every shell command, session, tool call and hook
// output it shows, in document order, against a real hubd and real hub-mcp
// processes, and compares what they print with what the document shows.
// The document's own last section says how it is marked up ("How this
// document is checked"); in short:
//
//   ```console              `$ ` lines are commands, run in one bash session
//                           (cwd and variables carry over); the lines after a
//                           command are its stdout. Each must exit 0.
//   ```sh sessions          `VAR=value ... claude|codex|gemini` per line: a
//                           session started as that CLI starts its MCP server
//                           from the configuration the commands above wrote
//   ```js call=NAME [wait]  `hub_tool {json arguments}` called by session NAME
//                           (wait: repeated until it matches, read-only tools)
//   ```text result          the call's text; ```json result: its
//                           structuredContent ("...": "..." = keys not shown)
//   ```text hook=NAME event=E   what Claude Code's hook adds to the context
//   <!-- doc-test: kill -9 NAME -->  SIGKILLs NAME's hub-mcp
//   <!-- doc-test: restart NAME -->  starts it again, as the same CLI process
//   <!-- doc-test: claude-trust -->  what accepting Claude Code's folder-trust
//                                    and project-server dialogs writes
//
// Placeholders: <uuid> <timestamp> <path> <home> <address> <id> <number> <text>,
// and <lines> as a block's last line (any number of further lines).
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { spawn } = require('child_process');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const toml = require('smol-toml');
const { Hubd, freshDbPath, waitFor, exited, runHook, tmpDir } = require('./harness');

const DOC = process.env.AGENTS_DOC || path.resolve(__dirname, '..', '..', '..', 'docs', 'agents.md');
const BIN_DIR = path.resolve(__dirname, '..', 'bin');
const CLIS = process.env.HUB_AGENT_CLIS && fs.existsSync(path.join(process.env.HUB_AGENT_CLIS, 'codex'))
  ? process.env.HUB_AGENT_CLIS : '';
const READ_ONLY = new Set(['hub_whoami', 'hub_list_agents', 'hub_inbox', 'hub_message_status',
  'hub_role_get', 'hub_role_list', 'hub_role_candidates']);
// What Codex passes an MCP server of its own environment besides env_vars
// (codex-rs rmcp-client: DEFAULT_ENV_VARS on Unix).
const CODEX_ENV = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'USER', '__CF_USER_TEXT_ENCODING', 'LANG',
  'LC_ALL', 'TERM', 'TMPDIR', 'TZ'];
const WAIT_MS = 60000;

// ---- the document -------------------------------------------------------------

function parseDoc(text) {
  const lines = text.split('\n');
  const steps = [];
  for (let i = 0; i < lines.length; i++) {
    const d = /^<!-- doc-test: (.*) -->$/.exec(lines[i]);
    if (d) { steps.push({ kind: 'directive', line: i + 1, text: d[1] }); continue; }
    const m = /^```(\S+)\s*(.*)$/.exec(lines[i]);
    if (!m) continue;
    let j = i + 1;
    while (j < lines.length && lines[j] !== '```') j++;
    const body = lines.slice(i + 1, j).join('\n');
    const tags = Object.fromEntries(m[2].split(/\s+/).filter(Boolean).map((t) => {
      const [k, ...v] = t.split('=');
      return [k, v.length ? v.join('=') : true];
    }));
    const block = { lang: m[1], tags, body, line: i + 1 };
    const last = steps[steps.length - 1];
    if (m[1] === 'console') steps.push({ kind: 'console', ...block });
    else if (tags.sessions) steps.push({ kind: 'sessions', ...block });
    else if (tags.call) steps.push({ kind: 'call', ...block, results: {} });
    else if (tags.hook) steps.push({ kind: 'hook', ...block });
    else if (tags.result && last && last.kind === 'call') last.results[m[1]] = block;
    i = j;
  }
  return steps;
}

// Commands of a console block: {command, expected lines}.
function consoleCommands(body) {
  const out = [];
  const lines = body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].startsWith('$ ')) {
      assert.ok(out.length, `output before any command: ${lines[i]}`);
      out[out.length - 1].expected.push(lines[i]);
      continue;
    }
    let command = lines[i].slice(2);
    while (command.endsWith('\\') && i + 1 < lines.length) command += '\n' + lines[++i];
    out.push({ command, expected: [] });
  }
  return out;
}

// ---- placeholders -------------------------------------------------------------

let context = {};  // home, address: filled in when the hub starts
const captured = new Map();  // <uuid:name> -> the value it matched first
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
function placeholder(name) {
  switch (name) {
    case 'uuid': return '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
    case 'timestamp': return '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d{3})?Z';
    case 'path': return '/[^\\s"]*';
    case 'home': return esc(context.home);
    case 'address': return esc(context.address);
    case 'id': return '[A-Za-z0-9_.:-]+';
    case 'number': return '\\d+';
    case 'text': return '.*';
    default: return null;
  }
}
// `expected` as a regular expression; <kind:name> captures what it matches
// as `name` (later ones must match the same value; a call's arguments use it
// as "<name>").
function pattern(expected) {
  const names = [];
  const re = expected.replace(/<([a-z]+)(?::([a-z0-9_]+))?>|[.*+?^${}()|[\]\\]/g, (all, kind, name) => {
    if (!kind) return '\\' + all;
    const p = placeholder(kind);
    if (p === null) return esc(all);
    if (!name) return `(?:${p})`;
    if (captured.has(name)) return esc(captured.get(name));
    if (names.includes(name)) return `\\k<c_${name}>`;
    names.push(name);
    return `(?<c_${name}>${p})`;
  });
  const regex = new RegExp(`^${re}$`, 's');
  return { test(actual) {
    const m = regex.exec(actual);
    if (m) for (const n of names) captured.set(n, m.groups[`c_${n}`]);
    return Boolean(m);
  } };
}
// A call's arguments with "<name>" replaced by what <kind:name> captured.
function substitute(value) {
  if (typeof value === 'string') {
    return value.replace(/<([a-z0-9_]+)>/g, (all, n) => {
      assert.ok(captured.has(n), `nothing captured as ${n} above`);
      return captured.get(n);
    });
  }
  if (Array.isArray(value)) return value.map(substitute);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v)]));
  }
  return value;
}

// null when `actual` matches `expected`, else where it does not.
function mismatch(expected, actual, at = '$') {
  if (typeof expected === 'string') {
    return typeof actual === 'string' && pattern(expected).test(actual) ? null
      : `${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      return `${at}: expected ${expected.length} elements, got ${JSON.stringify(actual)}`;
    }
    for (let i = 0; i < expected.length; i++) {
      const m = mismatch(expected[i], actual[i], `${at}[${i}]`);
      if (m) return m;
    }
    return null;
  }
  if (expected && typeof expected === 'object') {
    if (!actual || typeof actual !== 'object' || Array.isArray(actual)) return `${at}: expected an object, got ${JSON.stringify(actual)}`;
    const shown = Object.keys(expected).filter((k) => k !== '...');
    const missing = shown.filter((k) => !(k in actual));
    const extra = '...' in expected ? [] : Object.keys(actual).filter((k) => !(k in expected));
    if (missing.length || extra.length) return `${at}: missing ${missing}, not shown ${extra}`;
    for (const k of shown) {
      const m = mismatch(expected[k], actual[k], `${at}.${k}`);
      if (m) return m;
    }
    return null;
  }
  return expected === actual ? null : `${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
}

function linesMismatch(expected, actualText) {
  const actual = actualText.replace(/\n$/, '').split('\n');
  if (expected.length === 1 && expected[0] === '' && actualText === '') return null;
  // A last line <lines>: any number of lines (none too) after the others.
  if (expected[expected.length - 1] === '<lines>') {
    const head = expected.slice(0, -1);
    if (actual.length < head.length) return `expected at least ${head.length} lines, got ${actual.length}:\n${actualText}`;
    return linesMismatch(head, actual.slice(0, head.length).join('\n'));
  }
  if (expected.length !== actual.length) return `expected ${expected.length} lines, got ${actual.length}:\n${actualText}`;
  for (let i = 0; i < expected.length; i++) {
    if (!pattern(expected[i]).test(actual[i])) return `line ${i + 1}: ${JSON.stringify(actual[i])} does not match ${JSON.stringify(expected[i])}\n--- all of it:\n${actualText}`;
  }
  return null;
}

// ---- the shell ----------------------------------------------------------------

class Shell {
  constructor(env, cwd, work) {
    this.work = work;
    this.n = 0;
    this.proc = spawn('/bin/bash', ['--noprofile', '--norc'], { env, cwd, stdio: ['pipe', 'pipe', 'inherit'] });
    this.buffer = '';
    this.proc.stdout.on('data', (c) => { this.buffer += c; this._wake && this._wake(); });
  }

  /** Runs `command`; resolves {code, stdout, stderr}. */
  async run(command) {
    const n = ++this.n;
    const f = (x) => path.join(this.work, `${x}.${n}`);
    const marker = `__done_${n}__`;
    this.proc.stdin.write(`{\n${command}\n} >${f('out')} 2>${f('err')} </dev/null; echo $? >${f('rc')}; echo ${marker}\n`);
    const end = Date.now() + 90000;
    while (!this.buffer.includes(marker)) {
      if (Date.now() > end) throw new Error(`did not finish within 90 s: ${command}`);
      await new Promise((r) => { this._wake = r; setTimeout(r, 200); });
    }
    const read = (x) => fs.readFileSync(f(x), 'utf8');
    return { code: Number(read('rc').trim()), stdout: read('out'), stderr: read('err') };
  }

  async state() {
    const { stdout } = await this.run('pwd; env -0');
    const cwd = stdout.slice(0, stdout.indexOf('\n'));
    const env = {};
    for (const kv of stdout.slice(cwd.length + 1).split('\0')) {
      const i = kv.indexOf('=');
      if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
    }
    return { cwd, env };
  }

  close() { this.proc.stdin.end('exit 0\n'); }
}

// ---- sessions -----------------------------------------------------------------

const readJson = (file) => (fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {});

// The server entry a CLI would start in `cwd`, and the environment it gives it.
function configured(cli, cwd, env) {
  const home = env.HOME;
  if (cli === 'claude') {
    const entry = (readJson(path.join(cwd, '.mcp.json')).mcpServers || {}).hub ||
      (readJson(path.join(home, '.claude.json')).mcpServers || {}).hub;
    return entry && { entry, env: { ...env, ...entry.env, CLAUDE_CODE_SESSION_ID: crypto.randomUUID() } };
  }
  if (cli === 'gemini') {
    const entry = (readJson(path.join(cwd, '.gemini', 'settings.json')).mcpServers || {}).hub ||
      (readJson(path.join(home, '.gemini', 'settings.json')).mcpServers || {}).hub;
    return entry && { entry, env: { ...env, ...entry.env } };
  }
  if (cli === 'codex') {
    const files = [path.join(cwd, '.codex', 'config.toml'),
      path.join(env.CODEX_HOME || path.join(home, '.codex'), 'config.toml')];
    for (const file of files) {
      if (!fs.existsSync(file)) continue;
      const entry = (toml.parse(fs.readFileSync(file, 'utf8')).mcp_servers || {}).hub;
      if (!entry) continue;
      const passed = {};
      for (const k of [...CODEX_ENV, ...(entry.env_vars || [])]) if (k in env) passed[k] = env[k];
      return { entry, env: { ...passed, ...entry.env } };
    }
  }
  return null;
}

class Session {
  static async start(name, cli, cwd, env) {
    const c = configured(cli, cwd, env);
    assert.ok(c, `no hub server configured for ${cli} in ${cwd}`);
    const s = new Session();
    s.name = name;
    // Each session stands for its own CLI process: the hook finds the
    // server's directory by the CLI's pid, and here every server's parent is
    // this process, so each gets its own runtime root instead.
    s.root = tmpDir(`doc-${name}`);
    s.configured = c;
    s.cli = cli;
    s.cwd = cwd;
    s.sessionId = c.env.CLAUDE_CODE_SESSION_ID || '';
    await s.connect();
    return s;
  }

  // Starts the configured server (again, after a kill: the same CLI process,
  // so the same runtime root and session id) and waits until it attached.
  async connect() {
    const s = this;
    const { name } = s;
    const c = s.configured;
    const cwd = s.cwd;
    s.transport = new StdioClientTransport({ command: c.entry.command, args: c.entry.args, cwd,
      env: { ...c.env, HUB_MCP_RUNTIME_DIR: s.root }, stderr: 'pipe' });
    s.stderr = '';
    s.transport.stderr.on('data', (d) => { s.stderr += d; });
    s.client = new Client({ name: s.cli, version: '1.0.0' });
    await s.client.connect(s.transport);
    try {
      await waitFor(`${name} attached`, async () => (await s.call('hub_whoami')).structuredContent.attached);
    } catch (e) {
      throw new Error(`${e.message}; its stderr:\n${s.stderr}`);
    }
  }

  call(name, args) { return this.client.callTool({ name, arguments: args }); }

  waitingEvents() {
    const ev = path.join(this.root, String(process.pid), 'ev');
    return fs.existsSync(ev) ? fs.readdirSync(ev).length : 0;
  }

  hook(event) { return runHook(event, { HUB_MCP_RUNTIME_DIR: this.root }, this.sessionId); }
}

// ---- the run --------------------------------------------------------------------

let hubd;
let shell;
const sessions = new Map();

test.before(async () => {
  hubd = await Hubd.start({ dbPath: freshDbPath('agents-doc') });
  const root = tmpDir('agents-doc');
  const home = path.join(root, 'home');
  const work = path.join(root, 'work');
  fs.mkdirSync(home);
  fs.mkdirSync(work);
  context = { home, address: hubd.address };
  const env = { HOME: home, HUB_ADDR: hubd.address, USER: 'fleet', SHELL: '/bin/bash', LANG: 'C.UTF-8',
    TERM: 'dumb', NO_COLOR: '1', HUB_MCP_MODULES: process.env.HUB_MCP_MODULES || '',
    PATH: [BIN_DIR, CLIS, '/usr/local/bin', '/usr/bin', '/bin'].filter(Boolean).join(':') };
  shell = new Shell(env, home, work);
});
test.after(async () => {
  for (const s of sessions.values()) {
    try { await s.client.close(); } catch (_) { /* gone */ }
  }
  if (shell) shell.close();
  await hubd.stop();
});

function session(name) {
  const s = sessions.get(name);
  assert.ok(s, `no session ${name} (started by a sessions block above)`);
  return s;
}

async function runConsole(step) {
  for (const { command, expected } of consoleCommands(step.body)) {
    const r = await shell.run(command);
    assert.equal(r.code, 0, `${command}\nexited ${r.code}; stderr:\n${r.stderr}`);
    const why = linesMismatch(expected.length ? expected : [''], r.stdout);
    assert.equal(why, null, `${command}\n${why}`);
  }
}

async function runSessions(step) {
  const { cwd, env } = await shell.state();
  for (const line of step.body.split('\n').filter(Boolean)) {
    const words = line.trim().split(/\s+/);
    const assigned = {};
    while (/^[A-Z_]+=/.test(words[0])) {
      const [k, v] = words.shift().split(/=(.*)/s);
      assigned[k] = v;
    }
    assert.equal(words.length, 1, `a session line is VAR=value ... CLI: ${line}`);
    const name = assigned.HUB_AGENT_ID;
    assert.ok(name, `a session line names its agent with HUB_AGENT_ID: ${line}`);
    sessions.set(name, await Session.start(name, words[0], cwd, { ...env, ...assigned }));
  }
}

async function runCall(step) {
  const s = session(step.tags.call);
  const m = /^(hub_[a-z_]+)\s*([\s\S]*)$/.exec(step.body.trim());
  assert.ok(m, `a call block is: hub_tool {arguments}: ${step.body}`);
  const args = substitute(m[2] ? JSON.parse(m[2]) : {});
  assert.ok(Object.keys(step.results).length, 'a call block is followed by its result');
  if (step.tags.wait) assert.ok(READ_ONLY.has(m[1]), `only read-only tools may be repeated: ${m[1]}`);
  const check = (r) => {
    const problems = [];
    if (step.results.text) {
      const why = linesMismatch(step.results.text.body.split('\n'), r.content[0].text);
      if (why) problems.push(`text: ${why}`);
    }
    if (step.results.json) {
      const why = mismatch(JSON.parse(step.results.json.body), r.structuredContent);
      if (why) problems.push(`structuredContent: ${why}\n--- was:\n${JSON.stringify(r.structuredContent, null, 2)}`);
    }
    return problems.join('\n') || null;
  };
  let why;
  const end = Date.now() + WAIT_MS;
  do {
    why = check(await s.call(m[1], args));
    if (!why || !step.tags.wait) break;
    await new Promise((r) => setTimeout(r, 100));
  } while (Date.now() < end);
  assert.equal(why, null, `${step.tags.call}: ${step.body}\n${why}`);
}

async function runHookStep(step) {
  const s = session(step.tags.hook);
  const event = step.tags.event;
  const expected = step.body.split('\n');
  const events = expected.filter((l) => /^hub (message|role|presence): /.test(l)).length;
  let why;
  const end = Date.now() + WAIT_MS;
  for (;;) {
    // Wait for the events the block shows, then run the hook once: it claims them.
    if (events) await waitFor(`${events} event(s) for ${s.name}`, () => s.waitingEvents() >= events, WAIT_MS);
    const r = await s.hook(event);
    assert.equal(r.code, 0, r.stderr);
    if (!r.stdout) {
      why = 'the hook printed nothing';
    } else {
      const out = JSON.parse(r.stdout);
      assert.equal(out.hookSpecificOutput.hookEventName, event);
      why = linesMismatch(expected, out.hookSpecificOutput.additionalContext);
    }
    // SessionStart claims nothing that matters at the start: it may be
    // repeated until the server attached and wrote its context.
    if (!why || event !== 'SessionStart' || Date.now() > end) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(why, null, `${s.name}'s ${event} hook: ${why}`);
}

// Writes what Claude Code writes when the user, in the shell's working
// directory, accepts its folder-trust dialog (~/.claude.json, projects[dir])
// and then approves the project's MCP server "hub" (.claude/settings.local.json).
async function trustFolder() {
  const { cwd, env } = await shell.state();
  const file = path.join(env.HOME, '.claude.json');
  const data = readJson(file);
  data.projects = data.projects || {};
  data.projects[cwd] = { ...(data.projects[cwd] || {}), hasTrustDialogAccepted: true };
  fs.writeFileSync(file, JSON.stringify(data, null, 2));
  const local = path.join(cwd, '.claude', 'settings.local.json');
  const settings = readJson(local);
  settings.enabledMcpjsonServers = [...new Set([...(settings.enabledMcpjsonServers || []), 'hub'])];
  fs.writeFileSync(local, JSON.stringify(settings, null, 2));
}

async function runDirective(step) {
  if (step.text === 'claude-trust') return trustFolder();
  const m = /^(kill -9|restart) (\S+)$/.exec(step.text);
  assert.ok(m, `unknown directive ${step.text}`);
  const s = session(m[2]);
  if (m[1] === 'restart') {
    // The CLI starts the server again on its next hub tool call.
    try { await s.client.close(); } catch (_) { /* gone */ }
    return s.connect();
  }
  const gone = exited({ transport: s.transport });
  process.kill(s.transport.pid, 'SIGKILL');
  await gone;
}

const RUN = { console: runConsole, sessions: runSessions, call: runCall, hook: runHookStep,
  directive: runDirective };
const STEPS = parseDoc(fs.readFileSync(DOC, 'utf8'));

test('docs/agents.md has sessions, tool calls, hooks and a crash', () => {
  const kinds = new Set(STEPS.map((s) => s.kind));
  for (const k of Object.keys(RUN)) assert.ok(kinds.has(k), k);
});

for (const step of STEPS) {
  const first = (step.body || step.text).split('\n')[0];
  const needsClis = (step.kind === 'console' && /^\$ ([A-Z_]+=\S* )*(claude|codex|gemini)\b/m.test(step.body)) ||
    (step.kind === 'directive' && step.text === 'claude-trust');
  const skip = needsClis && !CLIS ? 'HUB_AGENT_CLIS is not set (tools/setup.sh installs the CLIs)' : false;
  test(`agents.md:${step.line} ${step.kind} ${first.slice(0, 60)}`, { skip }, () => RUN[step.kind](step));
}
