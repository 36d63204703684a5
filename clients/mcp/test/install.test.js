'use strict';
// install/uninstall over temporary HOME and project directories: the entry
// each CLI documents, idempotent, other entries byte for byte, malformed
// files refused.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { execFile } = require('child_process');
const { apply, InstallError, BIN, hookCommand } = require('../lib/install');
const { tmpDir } = require('./harness');

const ENV = { HUB_MCP_MODULES: '/opt/hub-mcp/node_modules' };

function dirs() {
  const root = tmpDir('install');
  const home = path.join(root, 'home');
  const dir = path.join(root, 'proj');
  fs.mkdirSync(home);
  fs.mkdirSync(dir);
  return { home, dir };
}

function write(file, text) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

const read = (file) => fs.readFileSync(file, 'utf8');
const results = (r) => r.changes.map((c) => c.result);

// An existing file as the CLI writes it, with other entries and odd bytes.
const CLAUDE_JSON = JSON.stringify({ numStartups: 7, projects: { '/x': { allowedTools: ['a'] } },
  mcpServers: { other: { type: 'stdio', command: 'other-mcp', args: ['--x=ü'] } }, tail: [1, 2] }, null, 2) + '\n';
const SETTINGS = JSON.stringify({ permissions: { allow: ['Bash(ls)'] }, hooks: { PostToolUse: [
  { matcher: 'Write', hooks: [{ type: 'command', command: 'prettier --write' }] }] } }, null, 2) + '\n';

test('claude, user scope: mcpServers.hub in ~/.claude.json and hooks in ~/.claude/settings.json', () => {
  const { home, dir } = dirs();
  const claudeJson = path.join(home, '.claude.json');
  const settings = path.join(home, '.claude', 'settings.json');
  write(claudeJson, CLAUDE_JSON);
  write(settings, SETTINGS);
  const o = { client: 'claude', scope: 'user', hub: '10.0.0.1:27889', tokenEnv: 'HUB_TOKEN', home, dir, env: ENV };
  assert.deepEqual(results(apply(true, o)), ['changed', 'changed']);
  const data = JSON.parse(read(claudeJson));
  assert.deepEqual(data.mcpServers.hub, { type: 'stdio', command: BIN,
    args: ['serve', '--client=claude', '--hub=10.0.0.1:27889', '--token-env=HUB_TOKEN'], env: ENV });
  const before = JSON.parse(CLAUDE_JSON);
  for (const k of ['numStartups', 'projects', 'tail']) assert.deepEqual(data[k], before[k]);
  assert.deepEqual(data.mcpServers.other, before.mcpServers.other);
  assert.ok(read(claudeJson).startsWith(CLAUDE_JSON.slice(0, CLAUDE_JSON.indexOf('    }\n  }'))));
  const hooks = JSON.parse(read(settings)).hooks;
  assert.deepEqual(Object.keys(hooks), ['PostToolUse', 'SessionStart', 'UserPromptSubmit']);
  assert.equal(hooks.PostToolUse[0].hooks[0].command, 'prettier --write');
  assert.equal(hooks.PostToolUse[1].matcher, '*');
  assert.equal(hooks.SessionStart[0].hooks[0].command, `${BIN} hook --client=claude --event=SessionStart`);
  // Idempotent.
  const snapshot = [read(claudeJson), read(settings)];
  assert.deepEqual(results(apply(true, o)), ['unchanged', 'unchanged']);
  assert.deepEqual([read(claudeJson), read(settings)], snapshot);
  // Uninstall restores the files byte for byte.
  assert.deepEqual(results(apply(false, o)), ['changed', 'changed']);
  assert.equal(read(claudeJson), CLAUDE_JSON);
  assert.equal(read(settings), SETTINGS);
  assert.deepEqual(results(apply(false, o)), ['unchanged', 'unchanged']);
});

test('claude, project scope: .mcp.json and .claude/settings.json, created and removed again', () => {
  const { home, dir } = dirs();
  const o = { client: 'claude', scope: 'project', home, dir, env: ENV };
  const r = apply(true, o);
  assert.deepEqual(results(r), ['created', 'created']);
  assert.match(r.notes.join('\n'), /approve/);
  assert.deepEqual(JSON.parse(read(path.join(dir, '.mcp.json'))).mcpServers.hub.args, ['serve', '--client=claude']);
  assert.deepEqual(results(apply(false, o)), ['removed', 'removed']);
  assert.ok(!fs.existsSync(path.join(dir, '.mcp.json')));
  assert.ok(!fs.existsSync(path.join(home, '.claude.json')));
});

// A hooks file with an entry of its own, as a user or another tool wrote it.
const CODEX_HOOKS = JSON.stringify({ hooks: { PostToolUse: [{ matcher: 'Bash', hooks: [
  { type: 'command', command: 'python3 ~/.codex/log.py', timeout: 30 }] }] } }, null, 2) + '\n';

test('codex: only the [mcp_servers.hub] table text changes; hooks in hooks.json beside it', () => {
  const { home, dir } = dirs();
  const file = path.join(home, '.codex', 'config.toml');
  const hooksFile = path.join(home, '.codex', 'hooks.json');
  const original = '# my settings\nmodel = "o3"   # keep this comment\n\n[mcp_servers.other]\ncommand = "x"\n' +
    'args = [ "a",  "b" ]\n\n[profiles.fast]\nmodel="o4-mini"\n';
  write(file, original);
  write(hooksFile, CODEX_HOOKS);
  const o = { client: 'codex', hub: '127.0.0.1:5', home, dir, env: ENV };
  const r = apply(true, o);
  assert.deepEqual(results(r), ['changed', 'changed']);
  assert.match(r.notes.join('\n'), /trust the three "hub-mcp hook" entries/);
  const hooks = JSON.parse(read(hooksFile)).hooks;
  assert.deepEqual(Object.keys(hooks), ['PostToolUse', 'SessionStart', 'UserPromptSubmit']);
  assert.equal(hooks.PostToolUse[0].hooks[0].command, 'python3 ~/.codex/log.py');
  for (const event of ['SessionStart', 'UserPromptSubmit', 'PostToolUse']) {
    // No matcher: every tool (Codex reads a matcher as a regular expression).
    assert.deepEqual(hooks[event][hooks[event].length - 1], { hooks: [{ type: 'command',
      command: `${BIN} hook --client=codex --event=${event}`, timeout: 5 }] }, event);
  }
  assert.ok(read(hooksFile).startsWith(CODEX_HOOKS.slice(0, CODEX_HOOKS.indexOf('\n    ]'))));
  const text = read(file);
  assert.ok(text.startsWith(original), 'everything before is kept byte for byte');
  assert.equal(text.slice(original.length), `\n[mcp_servers.hub]\ncommand = ${JSON.stringify(BIN)}\n` +
    'args = ["serve", "--client=codex", "--hub=127.0.0.1:5"]\nrequired = true\nstartup_timeout_sec = 30\n' +
    'env = { HUB_MCP_MODULES = "/opt/hub-mcp/node_modules" }\n' +
    'env_vars = ["HUB_ADDR", "HUB_AGENT_ID", "HUB_SESSION_ID", "HUB_PROJECT_ID", "TFX_PROJECT_ID", "HUB_HOST_ID", ' +
    '"TFX_HOST_ID", "HUB_MCP_RUNTIME_DIR", "XDG_RUNTIME_DIR", "TMUX", "TMUX_PANE", "HUB_TMUX_SESSION", "HUB_TOKEN"]\n');
  assert.deepEqual(results(apply(true, o)), ['unchanged', 'unchanged']);
  // A changed address replaces the table in place.
  assert.deepEqual(results(apply(true, { ...o, hub: '127.0.0.1:6' })), ['changed', 'unchanged']);
  assert.match(read(file), /--hub=127\.0\.0\.1:6/);
  assert.equal((read(file).match(/\[mcp_servers\.hub\]/g) || []).length, 1);
  // A table in the middle is replaced where it is, with its sub-table.
  write(file, 'a = 1\n\n[mcp_servers.hub]\ncommand = "old"\n\n[mcp_servers.hub.env]\nX = "1"\n\n[z]\nb = 2\n');
  apply(true, o);
  assert.match(read(file), /^a = 1\n\n\[mcp_servers\.hub\]\ncommand = "[^"]+"\nargs = .*\nrequired = true\nstartup_timeout_sec = 30\nenv = .*\nenv_vars = .*\n\n\[z\]\nb = 2\n$/);
  write(file, original);
  apply(true, o);
  assert.deepEqual(results(apply(false, o)), ['changed', 'changed']);
  assert.equal(read(file), original);
  assert.equal(read(hooksFile), CODEX_HOOKS);
  // Ours alone: uninstall removes the file; $CODEX_HOME and project scope.
  fs.rmSync(hooksFile);
  const codexHome = path.join(home, 'codex-home');
  assert.deepEqual(results(apply(true, { ...o, env: { ...ENV, CODEX_HOME: codexHome } })), ['created', 'created']);
  assert.ok(fs.existsSync(path.join(codexHome, 'hooks.json')));
  const p = apply(true, { ...o, scope: 'project' });
  assert.deepEqual(p.changes.map((c) => c.file), [path.join(dir, '.codex', 'config.toml'), path.join(dir, '.codex', 'hooks.json')]);
  assert.match(p.notes.join('\n'), /only when the project is trusted/);
  assert.deepEqual(results(apply(false, { ...o, scope: 'project' })), ['removed', 'removed']);
});

test('gemini: mcpServers.hub and hooks in .gemini/settings.json (project) or ~/.gemini/settings.json (user)', () => {
  const { home, dir } = dirs();
  const userFile = path.join(home, '.gemini', 'settings.json');
  const original = '{\n    "theme": "GitHub",\n    "mcpServers": {},\n    "hooks": {\n        "AfterTool": [\n' +
    '            {\n                "matcher": "write_file",\n                "hooks": [\n' +
    '                    {\n                        "type": "command",\n                        "command": "npx prettier"\n' +
    '                    }\n                ]\n            }\n        ]\n    }\n}\n';
  write(userFile, original);
  const o = { client: 'gemini', scope: 'user', home, dir, env: ENV };
  const r = apply(true, o);
  assert.deepEqual(results(r), ['changed']);
  assert.equal(r.changes[0].what, 'mcpServers.hub, hooks (SessionStart, BeforeAgent, AfterTool)');
  assert.match(r.notes.join('\n'), /only in trusted folders/);
  const data = JSON.parse(read(userFile));
  assert.deepEqual(data.mcpServers.hub, { command: BIN, args: ['serve', '--client=gemini'], env: ENV });
  assert.deepEqual(Object.keys(data.hooks), ['AfterTool', 'SessionStart', 'BeforeAgent']);
  assert.equal(data.hooks.AfterTool[0].hooks[0].command, 'npx prettier');
  const entry = (event) => ({ type: 'command', command: hookCommand(event, 'gemini'), timeout: 5000,
    name: `hub-mcp ${event}` });
  assert.deepEqual(data.hooks.AfterTool[1], { matcher: '*', hooks: [entry('AfterTool')] });
  assert.deepEqual(data.hooks.SessionStart, [{ hooks: [entry('SessionStart')] }]);
  assert.deepEqual(data.hooks.BeforeAgent, [{ hooks: [entry('BeforeAgent')] }]);
  assert.match(read(userFile), /^\{\n {4}"theme"/, 'keeps the file\'s 4-space indentation');
  assert.deepEqual(results(apply(true, o)), ['unchanged']);
  apply(false, o);
  assert.equal(read(userFile), original.replace('    "mcpServers": {},\n', ''));
  const p = apply(true, { ...o, scope: 'project' });
  assert.equal(p.changes[0].file, path.join(dir, '.gemini', 'settings.json'));
  assert.deepEqual(results(apply(false, { ...o, scope: 'project' })), ['removed']);
});

test('a malformed file is reported and never overwritten', () => {
  const { home, dir } = dirs();
  const cases = [
    ['claude', 'user', path.join(home, '.claude.json'), '{"mcpServers": {'],
    ['claude', 'user', path.join(home, '.claude', 'settings.json'), '{"hooks": {"SessionStart": 3}}'],
    ['claude', 'project', path.join(dir, '.mcp.json'), '{"mcpServers": []}'],
    ['codex', 'user', path.join(home, '.codex', 'config.toml'), 'model = "o3\n[mcp_servers.other\n'],
    ['codex', 'user', path.join(home, '.codex', 'config.toml'), 'mcp_servers = { hub = { command = "x" } }\n'],
    ['codex', 'user', path.join(home, '.codex', 'hooks.json'), '{"hooks": {"UserPromptSubmit": {}}}'],
    ['gemini', 'project', path.join(dir, '.gemini', 'settings.json'), '[1, 2]'],
    ['gemini', 'project', path.join(dir, '.gemini', 'settings.json'), '{"hooks": {"BeforeAgent": "x"}}'],
  ];
  for (const [client, scope, file, text] of cases) {
    const all = [path.join(home, '.claude.json'), path.join(home, '.claude', 'settings.json'),
      path.join(home, '.codex', 'config.toml'), path.join(home, '.codex', 'hooks.json')];
    for (const f of all) fs.rmSync(f, { force: true });
    write(file, text);
    for (const install of [true, false]) {
      assert.throws(() => apply(install, { client, scope, home, dir, env: ENV }), InstallError, `${client} ${file}`);
      assert.equal(read(file), text);
      // Nothing else was written either: every file is checked first.
      assert.deepEqual(all.filter((f) => f !== file && fs.existsSync(f)), [], `${client} ${file}`);
    }
  }
  assert.throws(() => apply(true, { client: 'vim', home, dir, env: ENV }), InstallError);
  assert.throws(() => apply(true, { client: 'claude', scope: 'global', home, dir, env: ENV }), InstallError);
});

// `hub-mcp install` itself, as a user runs it: refuses to write an entry
// whose HUB_MCP_MODULES does not hold hub-mcp's dependencies (the CLI would
// start the server, see it exit, and say only "Connection closed").
function runBin(args, env, cwd) {
  return new Promise((resolve) => execFile(BIN, args, { cwd, env },
    (error, stdout, stderr) => resolve({ code: error ? error.code : 0, stdout, stderr })));
}

test('hub-mcp install refuses a module path without hub-mcp\'s dependencies and says what to run', async () => {
  const { home, dir } = dirs();
  const missing = path.join(home, 'no-such', 'node_modules');
  const cases = [
    // HUB_MCP_MODULES names a directory that is not there.
    [{ PATH: process.env.PATH, HOME: home, HUB_MCP_MODULES: missing }, missing],
    // Not set, and a HOME without the cache tools/setup.sh fills.
    [{ PATH: process.env.PATH, HOME: home }, path.join(home, '.cache', 'hub', 'mcp', 'node_modules')],
  ];
  for (const [env, where] of cases) {
    for (const client of ['claude', 'codex', 'gemini']) {
      const r = await runBin(['install', `--client=${client}`, '--scope=user', '--hub=127.0.0.1:1'], env, dir);
      assert.equal(r.code, 1, `${client}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.ok(r.stderr.includes(`hub-mcp's npm dependencies are not in ${where}`), r.stderr);
      assert.match(r.stderr, /Run \/\S+\/tools\/setup\.sh .*or set HUB_MCP_MODULES/, r.stderr);
      assert.match(r.stderr, /nothing was written/);
      assert.deepEqual(fs.readdirSync(home).filter((f) => f !== 'no-such'), [], `${client} wrote into HOME`);
    }
  }
  // With the dependencies there it installs (and uninstall never needs them).
  const ok = await runBin(['install', '--client=claude', '--scope=user', '--hub=127.0.0.1:1'],
    { PATH: process.env.PATH, HOME: home, HUB_MCP_MODULES: process.env.HUB_MCP_MODULES }, dir);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /created: .*\.claude\.json/);
  const un = await runBin(['uninstall', '--client=claude', '--scope=user'], { PATH: process.env.PATH, HOME: home,
    HUB_MCP_MODULES: missing }, dir);
  assert.equal(un.code, 0, un.stderr);
  assert.match(un.stdout, /removed: .*\.claude\.json/);
});
