'use strict';
// Identity derivation: stable agent ids, project ids from files or git, hosts.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { resolveIdentity, projectId, hostId, hash22, startedForHealthCheck } = require('../lib/identity');
const { tmpDir } = require('./harness');

test('opaque ids are prefix + 22 characters of base64url(SHA-256)', () => {
  assert.equal(hash22('abc'), 'ungWv48Bz-pBQUDeXa4iI7');  // sha256("abc") = ba7816bf...
  assert.match(hostId({ TFX_HOST_ID: 'my host' }), /^hst_[A-Za-z0-9_-]{22}$/);
  assert.equal(hostId({ HUB_HOST_ID: 'hst_given' }), 'hst_given');
  assert.equal(hostId({}), hostId({}));
});

test('project: env, then .hub, then .triflux/project.json, then the git root commit', () => {
  const root = tmpDir('ident');
  const deep = path.join(root, 'a', 'b');
  fs.mkdirSync(deep, { recursive: true });
  assert.equal(projectId({}, deep).projectId, undefined);
  const git = (...args) => execFileSync('git', args, { cwd: root, stdio: 'ignore', env: { ...process.env,
    GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } });
  git('init', '-q');
  git('commit', '-q', '--allow-empty', '-m', 'root');
  const rootCommit = execFileSync('git', ['rev-list', '--max-parents=0', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  const fromGit = projectId({}, deep);
  assert.deepEqual(fromGit, { projectId: 'prj_' + hash22('git:' + rootCommit), source: 'git' });
  git('commit', '-q', '--allow-empty', '-m', 'second');
  assert.equal(projectId({}, deep).projectId, fromGit.projectId, 'stable as history grows');
  fs.mkdirSync(path.join(root, '.triflux'));
  fs.writeFileSync(path.join(root, '.triflux', 'project.json'),
    JSON.stringify({ schema: 'tfx.project.v1', project_id: 'prj_TRIFLUXtrifluxTRIFLUXt' }));
  assert.equal(projectId({}, deep).projectId, 'prj_TRIFLUXtrifluxTRIFLUXt');
  fs.writeFileSync(path.join(root, 'a', '.hub'), 'prj_HUBfileHUBfileHUBfileX\n');
  assert.equal(projectId({}, deep).projectId, 'prj_HUBfileHUBfileHUBfileX');
  fs.writeFileSync(path.join(root, 'a', '.hub'), '{"project_id": "nonsense"}');
  const bad = projectId({}, deep);
  assert.equal(bad.projectId, undefined);
  assert.match(bad.warning, /names no valid project id/);
  assert.equal(projectId({ HUB_PROJECT_ID: 'prj_ENVenvENVenvENVenvENVX' }, deep).projectId, 'prj_ENVenvENVenvENVenvENVX');
});

test('agent id: given, else the tmux pane, else the CLI session, else host/directory/parent', () => {
  const env = { HUB_HOST_ID: 'hst_h' };
  const tmux = { ...env, TMUX: '/tmp/tmux-1000/work,5,0', TMUX_PANE: '%3', HUB_TMUX_SESSION: 's1' };
  assert.equal(resolveIdentity({ client: 'codex', agentId: 'given-1' }, tmux, '/').agentId, 'given-1');
  const a = resolveIdentity({ client: 'claude' }, { ...tmux, CLAUDE_CODE_SESSION_ID: 'one' }, '/x');
  const b = resolveIdentity({ client: 'claude' }, { ...tmux, CLAUDE_CODE_SESSION_ID: 'two' }, '/y');
  assert.equal(a.agentId, b.agentId, 'a restart in the same pane is the same agent');
  assert.equal(a.agentId, 'claude:' + hash22('hst_h:work:%3'));
  assert.deepEqual(a.tmux, { serverId: 'work', sessionName: 's1', pane: '%3' });
  assert.equal(a.sessionId, 'one');
  const c = resolveIdentity({ client: 'claude' }, { ...env, CLAUDE_CODE_SESSION_ID: 'sess-1' }, '/x');
  assert.equal(c.agentId, 'session:sess-1');
  assert.equal(c.cli, 'AGENT_CLI_CLAUDE');
  const long = resolveIdentity({ client: 'claude' }, { ...env, CLAUDE_CODE_SESSION_ID: 'x'.repeat(80) }, '/x');
  assert.equal(long.agentId, 'session_' + hash22('x'.repeat(80)));
  const d = resolveIdentity({ client: 'gemini' }, env, '/x');
  assert.match(d.agentId, /^gemini:[A-Za-z0-9_-]{22}$/);
  assert.throws(() => resolveIdentity({ client: 'vim' }, env, '/'), /--client/);
  const p = resolveIdentity({ client: 'claude', project: 'prj_bad' }, env, '/');
  assert.equal(p.projectId, undefined);
  assert.match(p.warnings[0], /not a project id/);
});

test('a health check is a parent CLI running its mcp command (claude mcp list, gemini mcp list)', () => {
  const check = (argv) => startedForHealthCheck(0, argv);
  assert.equal(check(['/opt/clis/claude', 'mcp', 'list']), true);
  assert.equal(check(['/opt/clis/claude', '--debug', 'mcp', 'get', 'hub']), true);
  assert.equal(check(['/usr/bin/node', '--max-old-space-size=12052', '/opt/clis/gemini', 'mcp', 'list']), true);
  assert.equal(check(['/opt/clis/claude', '-p', 'mcp list']), false);
  assert.equal(check(['/opt/clis/claude']), false);
  assert.equal(check(['/usr/bin/node', '/opt/clis/gemini', '-p', 'hi']), false);
  assert.equal(check(['/usr/bin/node', '--test', 'a.js', 'b.js']), false);
  assert.equal(check([]), false);
});
