'use strict';
// install/uninstall over temporary HOME and project directories: the entry
// each CLI documents, idempotent, other entries byte for byte, malformed
// files refused.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { apply, InstallError, BIN } = require('../lib/install');
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

test('codex: only the [mcp_servers.hub] table text changes', () => {
  const { home, dir } = dirs();
  const file = path.join(home, '.codex', 'config.toml');
  const original = '# my settings\nmodel = "o3"   # keep this comment\n\n[mcp_servers.other]\ncommand = "x"\n' +
    'args = [ "a",  "b" ]\n\n[profiles.fast]\nmodel="o4-mini"\n';
  write(file, original);
  const o = { client: 'codex', hub: '127.0.0.1:5', home, dir, env: ENV };
  assert.deepEqual(results(apply(true, o)), ['changed']);
  const text = read(file);
  assert.ok(text.startsWith(original), 'everything before is kept byte for byte');
  assert.equal(text.slice(original.length), `\n[mcp_servers.hub]\ncommand = ${JSON.stringify(BIN)}\n` +
    'args = ["serve", "--client=codex", "--hub=127.0.0.1:5"]\nenv = { HUB_MCP_MODULES = "/opt/hub-mcp/node_modules" }\n');
  assert.deepEqual(results(apply(true, o)), ['unchanged']);
  // A changed address replaces the table in place.
  assert.deepEqual(results(apply(true, { ...o, hub: '127.0.0.1:6' })), ['changed']);
  assert.match(read(file), /--hub=127\.0\.0\.1:6/);
  assert.equal((read(file).match(/\[mcp_servers\.hub\]/g) || []).length, 1);
  // A table in the middle is replaced where it is, with its sub-table.
  write(file, 'a = 1\n\n[mcp_servers.hub]\ncommand = "old"\n\n[mcp_servers.hub.env]\nX = "1"\n\n[z]\nb = 2\n');
  apply(true, o);
  assert.match(read(file), /^a = 1\n\n\[mcp_servers\.hub\]\ncommand = "[^"]+"\nargs = .*\nenv = .*\n\n\[z\]\nb = 2\n$/);
  write(file, original);
  apply(true, o);
  assert.deepEqual(results(apply(false, o)), ['changed']);
  assert.equal(read(file), original);
});

test('gemini: mcpServers.hub in .gemini/settings.json (project) or ~/.gemini/settings.json (user)', () => {
  const { home, dir } = dirs();
  const userFile = path.join(home, '.gemini', 'settings.json');
  const original = '{\n    "theme": "GitHub",\n    "mcpServers": {}\n}\n';
  write(userFile, original);
  const o = { client: 'gemini', scope: 'user', home, dir, env: ENV };
  assert.deepEqual(results(apply(true, o)), ['changed']);
  const data = JSON.parse(read(userFile));
  assert.deepEqual(data.mcpServers.hub, { command: BIN, args: ['serve', '--client=gemini'], env: ENV });
  assert.match(read(userFile), /^\{\n {4}"theme"/, 'keeps the file\'s 4-space indentation');
  assert.deepEqual(results(apply(true, o)), ['unchanged']);
  apply(false, o);
  assert.equal(read(userFile), '{\n    "theme": "GitHub"\n}\n');
  const p = apply(true, { ...o, scope: 'project' });
  assert.equal(p.changes[0].file, path.join(dir, '.gemini', 'settings.json'));
  assert.match(p.notes.join('\n'), /trust/);
});

test('a malformed file is reported and never overwritten', () => {
  const { home, dir } = dirs();
  const cases = [
    ['claude', 'user', path.join(home, '.claude.json'), '{"mcpServers": {'],
    ['claude', 'user', path.join(home, '.claude', 'settings.json'), '{"hooks": {"SessionStart": 3}}'],
    ['claude', 'project', path.join(dir, '.mcp.json'), '{"mcpServers": []}'],
    ['codex', 'user', path.join(home, '.codex', 'config.toml'), 'model = "o3\n[mcp_servers.other\n'],
    ['codex', 'user', path.join(home, '.codex', 'config.toml'), 'mcp_servers = { hub = { command = "x" } }\n'],
    ['gemini', 'project', path.join(dir, '.gemini', 'settings.json'), '[1, 2]'],
  ];
  for (const [client, scope, file, text] of cases) {
    for (const f of [path.join(home, '.claude.json'), path.join(home, '.claude', 'settings.json')]) {
      fs.rmSync(f, { force: true });
    }
    write(file, text);
    for (const install of [true, false]) {
      assert.throws(() => apply(install, { client, scope, home, dir, env: ENV }), InstallError, `${client} ${file}`);
      assert.equal(read(file), text);
    }
  }
  assert.throws(() => apply(true, { client: 'vim', home, dir, env: ENV }), InstallError);
  assert.throws(() => apply(true, { client: 'claude', scope: 'global', home, dir, env: ENV }), InstallError);
});
