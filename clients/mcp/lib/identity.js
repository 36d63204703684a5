'use strict';
// Who this hub-mcp process is for hub: agent id, CLI, project, host, session
// and tmux locator, from flags and environment with derivation rules that give
// the same answers to a restarted session in the same place (so its new
// registration supersedes the old one instead of making a second agent).
//
// Opaque ids follow triflux (TRIFLUX-HUB §3.4): prefix + the first 22
// characters of base64url(SHA-256(input)).
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const CLIS = {
  claude: 'AGENT_CLI_CLAUDE',
  codex: 'AGENT_CLI_CODEX',
  gemini: 'AGENT_CLI_GEMINI',
  other: 'AGENT_CLI_OTHER',
};
const PROJECT_ID = /^prj_[A-Za-z0-9_-]{22}$/;
const HOST_ID = /^hst_[A-Za-z0-9_-]{1,124}$/;
const AGENT_ID = /^[A-Za-z0-9._:-]{3,64}$/;
const LOGICAL_REF = /^[A-Za-z0-9._:-]{1,128}$/;
// Environment variables the CLIs set in the MCP servers they start, naming
// their own session (Claude Code >= 2.1.154 sets CLAUDE_CODE_SESSION_ID).
const SESSION_ENV = {
  claude: ['CLAUDE_CODE_SESSION_ID'],
  codex: ['CODEX_SESSION_ID'],
  gemini: ['GEMINI_SESSION_ID'],
  other: [],
};

function hash22(input) {
  return crypto.createHash('sha256').update(input).digest('base64url').slice(0, 22);
}

function opaqueId(prefix, input) {
  return prefix + hash22(input);
}

// host_id: a valid raw hst_ id as is, else hst_ + hash of the raw value or
// of the host name.
function hostId(env) {
  const raw = (env.HUB_HOST_ID || env.TFX_HOST_ID || '').trim();
  if (HOST_ID.test(raw)) return raw;
  return opaqueId('hst_', raw || os.hostname());
}

// Walks up from `dir` to the first directory holding `name`; null if none.
function findUp(dir, name) {
  let d = path.resolve(dir);
  for (;;) {
    const candidate = path.join(d, name);
    if (fs.existsSync(candidate)) return candidate;
    const parent = path.dirname(d);
    if (parent === d) return null;
    d = parent;
  }
}

// A project file: JSON {"project_id": "prj_…"} (.hub, and triflux's
// .triflux/project.json with schema tfx.project.v1), or a .hub holding just
// the id. Returns {projectId} or {error}.
function readProjectFile(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch (e) {
    return { error: `cannot read ${file}: ${e.message}` };
  }
  if (PROJECT_ID.test(text)) return { projectId: text };
  try {
    const json = JSON.parse(text);
    if (json && PROJECT_ID.test(json.project_id)) return { projectId: json.project_id };
  } catch (_) { /* reported below */ }
  return { error: `${file} names no valid project id (prj_ + 22 base64url characters)` };
}

function git(cwd, args) {
  try {
    return execFileSync('git', args, { cwd, encoding: 'utf8', timeout: 3000,
      stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch (_) {
    return '';
  }
}

/**
 * The project: $HUB_PROJECT_ID / $TFX_PROJECT_ID, else the nearest `.hub`
 * file, else triflux's `.triflux/project.json`, else the git repository:
 * prj_ + hash22("git:" + its first root commit), the same for every clone
 * and worktree and never derived from a path. Returns {projectId, source,
 * warning?}; projectId is undefined when none is found.
 */
function projectId(env, cwd) {
  for (const name of ['HUB_PROJECT_ID', 'TFX_PROJECT_ID']) {
    const v = (env[name] || '').trim();
    if (v) {
      if (PROJECT_ID.test(v)) return { projectId: v, source: `$${name}` };
      return { projectId: undefined, source: 'none', warning: `$${name} is not a valid project id` };
    }
  }
  for (const name of ['.hub', path.join('.triflux', 'project.json')]) {
    const file = findUp(cwd, name);
    if (file && fs.statSync(file).isFile()) {
      const r = readProjectFile(file);
      if (r.projectId) return { projectId: r.projectId, source: file };
      return { projectId: undefined, source: 'none', warning: r.error };
    }
  }
  const roots = git(cwd, ['rev-list', '--max-parents=0', 'HEAD']).split('\n').filter(Boolean).sort();
  if (roots.length > 0) return { projectId: opaqueId('prj_', 'git:' + roots[0]), source: 'git' };
  return { projectId: undefined, source: 'none' };
}

/**
 * The tmux locator of the pane this process runs in, or null outside tmux.
 * mux_server_id follows hub's tmux adapter: "default" for the default
 * server, else the socket's name (selected with `tmux -L`).
 */
function tmuxTarget(env) {
  if (!env.TMUX || !env.TMUX_PANE) return null;
  const socket = env.TMUX.split(',')[0];
  const server = path.basename(socket);
  let session = (env.HUB_TMUX_SESSION || '').trim();
  if (!session) {
    try {
      session = execFileSync('tmux', ['display-message', '-p', '-t', env.TMUX_PANE, '#S'],
        { encoding: 'utf8', timeout: 2000, stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch (_) {
      session = '';
    }
  }
  if (!LOGICAL_REF.test(server) || !LOGICAL_REF.test(session)) return null;
  return { serverId: server, sessionName: session, pane: env.TMUX_PANE };
}

/** The structured tfx.transport-locator.v1 tmux locator, valid for ttlMs. */
function tmuxLocator(tmux, host, ttlMs, now = Date.now()) {
  return {
    schemaVersion: 'tfx.transport-locator.v1',
    transportId: opaqueId('trn_', `tmux:${host}:${tmux.serverId}:${tmux.sessionName}`),
    kind: 'TRANSPORT_KIND_TMUX',
    hostId: host,
    capabilities: ['TRANSPORT_CAPABILITY_PROBE', 'TRANSPORT_CAPABILITY_WAKE',
      'TRANSPORT_CAPABILITY_ACTIVATE'],
    priority: 50,
    expiresAt: { seconds: Math.floor((now + ttlMs - 1000) / 1000), nanos: 0 },
    tmux: { sessionName: tmux.sessionName, muxServerId: tmux.serverId },
  };
}

/**
 * Resolves the identity. `flags` come from the command line (agentId, client,
 * project, host, session); `env` is process.env. The agent id, in order: the
 * flag or $HUB_AGENT_ID; inside tmux `<cli>:` + hash22(host, tmux server,
 * pane), so a session restarted in the same pane supersedes its predecessor;
 * else `session:<CLI session id>` (triflux's form) when the CLI names its
 * session; else `<cli>:` + hash22(host, cwd, parent pid).
 */
function resolveIdentity(flags = {}, env = process.env, cwd = process.cwd()) {
  const client = (flags.client || env.HUB_CLIENT || 'other').toLowerCase();
  if (!CLIS[client]) throw new Error(`--client must be claude, codex, gemini or other (got ${client})`);
  const warnings = [];
  const host = flags.host || hostId(env);
  let project = flags.project
    ? { projectId: flags.project, source: '--project' }
    : projectId(env, cwd);
  if (flags.project && !PROJECT_ID.test(flags.project)) {
    project = { projectId: undefined, source: 'none',
      warning: `--project=${flags.project} is not a project id (prj_ + 22 base64url characters); ignored` };
  }
  if (project.warning) warnings.push(project.warning);
  let sessionId = flags.session || env.HUB_SESSION_ID || '';
  if (!sessionId) {
    for (const name of SESSION_ENV[client]) {
      if (env[name]) { sessionId = env[name]; break; }
    }
  }
  const tmux = flags.noTmux ? null : tmuxTarget(env);
  let agentId = flags.agentId || env.HUB_AGENT_ID || '';
  let agentIdSource = agentId ? 'given' : '';
  if (!agentId && tmux) {
    agentId = `${client}:${hash22(`${host}:${tmux.serverId}:${tmux.pane}`)}`;
    agentIdSource = 'tmux pane';
  }
  if (!agentId && sessionId) {
    agentId = `session:${sessionId}`;
    if (!AGENT_ID.test(agentId)) agentId = `session_${hash22(sessionId)}`;
    agentIdSource = 'CLI session';
  }
  if (!agentId) {
    agentId = `${client}:${hash22(`${host}:${path.resolve(cwd)}:${process.ppid}`)}`;
    agentIdSource = 'host, directory and parent process';
  }
  return {
    agentId,
    agentIdSource,
    client,
    cli: CLIS[client],
    projectId: project.projectId,
    projectSource: project.source,
    hostId: host,
    sessionId: sessionId || undefined,
    tmux,
    warnings,
  };
}

// The command line of process `pid` ([] when it cannot be read).
function commandLine(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
  } catch (_) { /* no /proc: ps */ }
  try {
    return execFileSync('ps', ['-o', 'args=', '-p', String(pid)], { encoding: 'utf8', timeout: 2000,
      stdio: ['ignore', 'pipe', 'ignore'] }).trim().split(/\s+/).filter(Boolean);
  } catch (_) {
    return [];
  }
}

const SCRIPT_HOSTS = /^(node|nodejs|bun|deno)(\.exe)?$/;

/**
 * Whether the CLI that started this server (process `pid`, its parent) runs
 * its `mcp` command (`claude mcp list`, `claude mcp get hub`, `gemini mcp
 * list`): a health check, which starts the server only to see it answer
 * the MCP handshake and then kills it. Such a server must not register an
 * agent: hub would list it, offline, forever. The command is the CLI's first
 * argument that is not a flag (after node and its script for a CLI that
 * runs on Node.js, as Gemini CLI does).
 */
function startedForHealthCheck(pid = process.ppid, argv = commandLine(pid)) {
  let args = argv.slice(1);
  if (SCRIPT_HOSTS.test(path.basename(argv[0] || ''))) {
    while (args.length && args[0].startsWith('-')) args = args.slice(1);
    args = args.slice(1);  // the CLI's script
  }
  const command = args.find((a) => !a.startsWith('-'));
  return command === 'mcp';
}

module.exports = {
  startedForHealthCheck, resolveIdentity, projectId, hostId, tmuxTarget, tmuxLocator, hash22, opaqueId,
  CLIS, PROJECT_ID, AGENT_ID,
};
