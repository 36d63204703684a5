'use strict';
// `hub-mcp install|uninstall`: writes (or removes) the hub server entry and
// hub-mcp's hooks in the documented configuration of one CLI, and nothing
// else.
//
//   claude  project: <dir>/.mcp.json             mcpServers.hub
//                    <dir>/.claude/settings.json hooks
//           user:    ~/.claude.json              mcpServers.hub
//                    ~/.claude/settings.json     hooks
//   codex   user:    ~/.codex/config.toml        [mcp_servers.hub] ($CODEX_HOME)
//                    ~/.codex/hooks.json         hooks
//           project: <dir>/.codex/config.toml     [mcp_servers.hub] (trusted projects)
//                    <dir>/.codex/hooks.json      hooks
//   gemini  project: <dir>/.gemini/settings.json mcpServers.hub, hooks
//           user:    ~/.gemini/settings.json     mcpServers.hub, hooks
//
// JSON files are parsed and written back with their own indentation and key
// order, so every other entry keeps its bytes when the file was formatted
// that way (as the CLIs write them). The TOML file is never re-serialized:
// only the text of the [mcp_servers.hub] table (and its sub-tables) is
// replaced, added or removed, and the result is parsed again before it is
// written. A file that does not parse is reported and left alone.
const fs = require('fs');
const os = require('os');
const path = require('path');

const BIN = path.resolve(__dirname, '..', 'bin', 'hub-mcp');
// The hooks of each CLI: its events for the same three moments (the session
// starts, a prompt is submitted, a tool call returned), the matcher its tool
// event needs to match every tool, and its timeout's unit. All three read
// the same output (hookSpecificOutput.additionalContext, bin/hub-mcp).
const HOOKS = {
  claude: { events: ['SessionStart', 'UserPromptSubmit', 'PostToolUse'], tool: 'PostToolUse', matcher: '*',
    timeout: 5 },
  // Codex: a group without a matcher matches every tool; timeout in seconds.
  codex: { events: ['SessionStart', 'UserPromptSubmit', 'PostToolUse'], timeout: 5 },
  // Gemini CLI: timeout in milliseconds; the name is what /hooks shows and
  // hooksConfig.disabled lists.
  gemini: { events: ['SessionStart', 'BeforeAgent', 'AfterTool'], tool: 'AfterTool', matcher: '*',
    timeout: 5000, named: true },
};

class InstallError extends Error {}

function modulesDir(env) {
  if (env.HUB_MCP_MODULES) return path.resolve(env.HUB_MCP_MODULES);
  const cache = env.HUB_CACHE_DIR || path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'hub');
  return path.join(cache, 'mcp', 'node_modules');
}

function serverArgs(o) {
  const args = ['serve', `--client=${o.client}`];
  if (o.hub) args.push(`--hub=${o.hub}`);
  if (o.tokenEnv) args.push(`--token-env=${o.tokenEnv}`);
  return args;
}

// ---- JSON ---------------------------------------------------------------------

function readJson(file) {
  if (!fs.existsSync(file)) return { exists: false, text: '', data: {}, indent: 2 };
  const text = fs.readFileSync(file, 'utf8');
  let data;
  try {
    data = text.trim() === '' ? {} : JSON.parse(text);
  } catch (e) {
    throw new InstallError(`${file} is not valid JSON (${e.message}); fix it first, nothing was written`);
  }
  if (!data || typeof data !== 'object' || Array.isArray(data)) {
    throw new InstallError(`${file} does not hold a JSON object; nothing was written`);
  }
  const m = /\n([ \t]+)"/.exec(text);
  return { exists: true, text, data, indent: m ? m[1] : 2 };
}

function objectAt(data, key, file) {
  if (data[key] === undefined) return null;
  if (!data[key] || typeof data[key] !== 'object' || Array.isArray(data[key])) {
    throw new InstallError(`${file}: "${key}" is not an object; nothing was written`);
  }
  return data[key];
}

// Writes `data` when its serialization differs; returns what happened.
function writeJson(file, before, data, { removeIfEmpty = false } = {}) {
  const empty = Object.keys(data).length === 0;
  if (removeIfEmpty && empty) {
    if (!before.exists) return 'unchanged';
    fs.rmSync(file);
    return 'removed';
  }
  const text = JSON.stringify(data, null, before.indent) + '\n';
  if (before.exists && text === before.text) return 'unchanged';
  if (!before.exists && empty) return 'unchanged';
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.hub-mcp.tmp`;
  fs.writeFileSync(tmp, text, { mode: before.exists ? fs.statSync(file).mode & 0o777 : 0o644 });
  fs.renameSync(tmp, file);
  return before.exists ? 'changed' : 'created';
}

// Reads and checks `file`, applies each edit to its data; returns the write,
// to be run once every file of the command has been checked.
function planJson(file, install, ...edits) {
  const before = readJson(file);
  for (const edit of edits) edit(before.data, file);
  return () => writeJson(file, before, before.data, { removeIfEmpty: !install });
}

// Sets (entry) or removes (null) mcpServers.hub.
function setMcpServer(data, file, entry) {
  const servers = objectAt(data, 'mcpServers', file);
  if (entry) {
    // An existing key keeps its place among its siblings; a new one goes last.
    if (servers) servers.hub = entry;
    else data.mcpServers = { hub: entry };
  } else if (servers) {
    delete servers.hub;
    if (Object.keys(servers).length === 0) delete data.mcpServers;
  }
}

// The hook command of `event`, and whether a command is one of ours.
function hookCommand(event, client = 'claude') {
  return `${BIN} hook --client=${client} --event=${event}`;
}
function isOurHook(command, event) {
  return typeof command === 'string' && /hub-mcp hook /.test(command) &&
    command.includes(`--event=${event}`);
}

function hookEntry(client, event) {
  const spec = HOOKS[client];
  const entry = { type: 'command', command: hookCommand(event, client), timeout: spec.timeout };
  if (spec.named) entry.name = `hub-mcp ${event}`;
  return entry;
}

// Adds (install) or removes our hook of each of `client`'s events in the
// "hooks" object; an existing one of ours is replaced in place.
function setHooks(data, file, client, install) {
  const hooks = objectAt(data, 'hooks', file) || {};
  const spec = HOOKS[client];
  for (const event of spec.events) {
    const groups = hooks[event] === undefined ? [] : hooks[event];
    if (!Array.isArray(groups)) throw new InstallError(`${file}: hooks.${event} is not an array; nothing was written`);
    const mine = hookEntry(client, event);
    let found = false;
    const kept = [];
    for (const group of groups) {
      if (!group || !Array.isArray(group.hooks)) { kept.push(group); continue; }
      const ours = group.hooks.findIndex((h) => h && isOurHook(h.command, event));
      if (ours < 0) { kept.push(group); continue; }
      if (install && !found) {
        group.hooks[ours] = mine;
        found = true;
        kept.push(group);
      } else {
        group.hooks.splice(ours, 1);
        if (group.hooks.length > 0) kept.push(group);
      }
    }
    if (install && !found) {
      kept.push(event === spec.tool ? { matcher: spec.matcher, hooks: [mine] } : { hooks: [mine] });
    }
    if (kept.length > 0) hooks[event] = kept;
    else delete hooks[event];
  }
  if (Object.keys(hooks).length > 0) data.hooks = hooks;
  else delete data.hooks;
}

// ---- TOML (Codex) -------------------------------------------------------------

const TABLE_HEADER = /^[ \t]*\[\[?[^\]]*\]\]?[ \t]*(#.*)?$/;
const HUB_HEADER = /^[ \t]*\[[ \t]*mcp_servers[ \t]*\.[ \t]*("hub"|'hub'|hub)[ \t]*(\.[^\]]*)?\][ \t]*(#.*)?$/;

function tomlString(s) {
  return JSON.stringify(s);  // a TOML basic string is JSON's escaping for these
}

// The variables of Codex's environment hub-mcp reads. Codex starts an MCP
// server with only a few of its own (HOME, PATH, TMPDIR, ...) unless env_vars
// names more; without XDG_RUNTIME_DIR the server would keep its local channel
// where its hooks (which get all of Codex's environment) do not look.
const CODEX_ENV_VARS = ['HUB_ADDR', 'HUB_AGENT_ID', 'HUB_SESSION_ID', 'HUB_PROJECT_ID', 'TFX_PROJECT_ID',
  'HUB_HOST_ID', 'TFX_HOST_ID', 'HUB_MCP_RUNTIME_DIR', 'XDG_RUNTIME_DIR', 'TMUX', 'TMUX_PANE', 'HUB_TMUX_SESSION'];

// Codex builds a session's first tool list waiting only about a second for
// an optional MCP server; hub-mcp (Node.js, the MCP SDK, gRPC) may take
// longer on a busy machine, and the model would then start without hub's
// tools. Required, it is waited for up to startup_timeout_sec, and a server
// that cannot start stops Codex with its own error. hub-mcp starts without
// hub being reachable, so an unreachable hub does not stop Codex.
const CODEX_STARTUP_SEC = 30;

function codexBlock(o, env) {
  const args = serverArgs(o).map(tomlString).join(', ');
  const vars = [...CODEX_ENV_VARS, o.tokenEnv || 'HUB_TOKEN'].map(tomlString).join(', ');
  return '[mcp_servers.hub]\n' +
    `command = ${tomlString(BIN)}\n` +
    `args = [${args}]\n` +
    'required = true\n' +
    `startup_timeout_sec = ${CODEX_STARTUP_SEC}\n` +
    `env = { HUB_MCP_MODULES = ${tomlString(modulesDir(env))} }\n` +
    `env_vars = [${vars}]\n`;
}

// Splits `text` into lines with their end, and finds the hub table's lines.
function hubTableRange(lines) {
  let start = -1;
  let end = -1;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].replace(/\r?\n$/, '');
    if (!TABLE_HEADER.test(line)) continue;
    if (HUB_HEADER.test(line)) {
      if (start < 0) start = i;
      else if (end >= 0) throw new InstallError('the [mcp_servers.hub] tables are not together');
    } else if (start >= 0 && end < 0) {
      end = i;
    }
  }
  if (start >= 0 && end < 0) end = lines.length;
  return { start, end };
}

// Checks `file` and computes its new text; returns the write (see planJson).
function planCodex(file, o, env, install) {
  const exists = fs.existsSync(file);
  const text = exists ? fs.readFileSync(file, 'utf8') : '';
  const toml = require('smol-toml');
  let parsed;
  try {
    parsed = toml.parse(text);
  } catch (e) {
    throw new InstallError(`${file} is not valid TOML (${String(e.message).split('\n')[0]}); fix it first, nothing was written`);
  }
  const lines = text.match(/[^\n]*\n|[^\n]+$/g) || [];
  const { start, end } = hubTableRange(lines);
  const defined = parsed.mcp_servers && Object.prototype.hasOwnProperty.call(parsed.mcp_servers, 'hub');
  if (defined && start < 0) {
    throw new InstallError(`${file} defines mcp_servers.hub in a form hub-mcp does not edit ` +
      '(an inline table or dotted keys); change it by hand');
  }
  let next;
  if (install) {
    const block = codexBlock(o, env);
    if (start >= 0) {
      // Keep blank lines and comments that follow the table's own lines.
      let keepFrom = end;
      while (keepFrom > start + 1 && /^[ \t]*(#.*)?\r?\n?$/.test(lines[keepFrom - 1])) keepFrom -= 1;
      next = lines.slice(0, start).join('') + block + lines.slice(keepFrom, end).join('') + lines.slice(end).join('');
    } else {
      let head = text;
      if (head.length > 0 && !head.endsWith('\n')) head += '\n';
      if (head.length > 0 && !head.endsWith('\n\n')) head += '\n';
      next = head + block;
    }
  } else {
    if (start < 0) return () => 'unchanged';
    let head = lines.slice(0, start).join('');
    const tail = lines.slice(end).join('');
    if (tail === '' && head.endsWith('\n\n')) head = head.slice(0, -1);
    next = head + tail;
  }
  if (next === text) return () => 'unchanged';
  try {
    const check = toml.parse(next);
    const hub = check.mcp_servers && check.mcp_servers.hub;
    if (install ? !hub || hub.command !== BIN : Boolean(hub)) throw new Error('the edit did not take');
  } catch (e) {
    throw new InstallError(`${file}: editing [mcp_servers.hub] would break the file (${e.message}); nothing was written`);
  }
  return () => {
    if (!install && next.trim() === '') {
      fs.rmSync(file);
      return 'removed';
    }
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const tmp = `${file}.hub-mcp.tmp`;
    fs.writeFileSync(tmp, next, { mode: exists ? fs.statSync(file).mode & 0o777 : 0o600 });
    fs.renameSync(tmp, file);
    return exists ? 'changed' : 'created';
  };
}

// ---- the command ----------------------------------------------------------------

/**
 * Installs or uninstalls. o: client, scope ('user' | 'project'), hub,
 * tokenEnv, home, dir (the project), env. Returns {changes: [{file, what,
 * result}], notes: [string]}; throws InstallError for what it refuses.
 */
function apply(install, o) {
  const env = o.env || process.env;
  const home = o.home || os.homedir();
  const dir = path.resolve(o.dir || process.cwd());
  const scope = o.scope || (o.client === 'codex' ? 'user' : 'project');
  if (!['user', 'project'].includes(scope)) throw new InstallError('--scope must be user or project');
  if (o.tokenEnv && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(o.tokenEnv)) {
    throw new InstallError('--token-env must name an environment variable');
  }
  const planned = [];  // [file, what, write]: every file is checked before any is written
  const notes = [];
  const env0 = { HUB_MCP_MODULES: modulesDir(env) };
  const hooksWhat = (client) => `hooks (${HOOKS[client].events.join(', ')})`;
  const hooks = (client) => (data, file) => setHooks(data, file, client, install);
  if (o.client === 'claude') {
    const mcpFile = scope === 'project' ? path.join(dir, '.mcp.json') : path.join(home, '.claude.json');
    const settings = scope === 'project' ? path.join(dir, '.claude', 'settings.json')
      : path.join(home, '.claude', 'settings.json');
    const entry = install ? { type: 'stdio', command: BIN, args: serverArgs(o), env: env0 } : null;
    planned.push([mcpFile, 'mcpServers.hub', planJson(mcpFile, install, (d, f) => setMcpServer(d, f, entry))]);
    planned.push([settings, hooksWhat('claude'), planJson(settings, install, hooks('claude'))]);
    if (install && scope === 'project') {
      notes.push('Claude Code asks once to approve the project MCP servers of .mcp.json: ' +
        'approve "hub" when it asks (claude mcp reset-project-choices asks again).');
    }
  } else if (o.client === 'codex') {
    const layer = scope === 'project' ? path.join(dir, '.codex') : env.CODEX_HOME || path.join(home, '.codex');
    const file = path.join(layer, 'config.toml');
    const hooksFile = path.join(layer, 'hooks.json');
    planned.push([file, '[mcp_servers.hub]', planCodex(file, o, env, install)]);
    planned.push([hooksFile, hooksWhat('codex'), planJson(hooksFile, install, hooks('codex'))]);
    if (install && scope === 'project') {
      notes.push('Codex reads a project\'s .codex/config.toml and .codex/hooks.json only when the project ' +
        'is trusted: trust it when Codex asks.');
    }
    if (install) {
      notes.push('Codex runs a new or changed hook only once you trust it, and skips it silently until ' +
        'then: open /hooks in codex and trust the three "hub-mcp hook" entries (codex exec ' +
        '--dangerously-bypass-hook-trust runs them without, for automation that vets its hooks).');
    }
  } else if (o.client === 'gemini') {
    const file = scope === 'project' ? path.join(dir, '.gemini', 'settings.json')
      : path.join(home, '.gemini', 'settings.json');
    const entry = install ? { command: BIN, args: serverArgs(o), env: env0 } : null;
    planned.push([file, `mcpServers.hub, ${hooksWhat('gemini')}`,
      planJson(file, install, (d, f) => setMcpServer(d, f, entry), hooks('gemini'))]);
    if (install) {
      notes.push('Gemini CLI starts MCP servers and runs hooks, the user\'s too, only in trusted folders: ' +
        'trust the project folder when it asks (or with /permissions); in a folder not trusted yet, run ' +
        (scope === 'project'
          ? 'it with GEMINI_CLI_TRUST_WORKSPACE=true (--skip-trust starts gemini -p, but Gemini CLI reads ' +
            'the project\'s settings before it applies that flag: no hub server, no hooks).'
          : 'gemini -p with --skip-trust or GEMINI_CLI_TRUST_WORKSPACE=true.'));
    }
  } else {
    throw new InstallError('--client must be claude, codex or gemini');
  }
  const changes = planned.map(([file, what, write]) => ({ file, what, result: write() }));
  return { changes, notes };
}

// Where hub-mcp's npm dependencies must be for the server to start; the
// entries install writes point the CLI there (HUB_MCP_MODULES). tools/setup.sh
// of the checkout that holds this file installs them.
const SETUP = path.resolve(__dirname, '..', '..', '..', 'tools', 'setup.sh');
function checkModules(env) {
  const dir = modulesDir(env);
  if (fs.existsSync(path.join(dir, '@modelcontextprotocol', 'sdk', 'package.json'))) return;
  const from = env.HUB_MCP_MODULES ? 'HUB_MCP_MODULES' : 'the default cache, as HUB_MCP_MODULES is not set';
  throw new InstallError(`hub-mcp's npm dependencies are not in ${dir} (${from}): a CLI would start ` +
    'the server and it would exit at once (the CLI says only "Connection closed"). Run ' +
    `${SETUP} (it installs them into $HUB_CACHE_DIR/mcp/node_modules, ~/.cache/hub/mcp/node_modules by ` +
    'default), or set HUB_MCP_MODULES to a node_modules directory that has them, then install again; ' +
    'nothing was written');
}

function runInstall(command, flags, env = process.env) {
  const install = command === 'install';
  try {
    if (install) checkModules(env);
    const { changes, notes } = apply(install, {
      client: flags.client, scope: flags.scope, hub: typeof flags.hub === 'string' ? flags.hub : undefined,
      tokenEnv: typeof flags['token-env'] === 'string' ? flags['token-env'] : undefined,
      dir: typeof flags.dir === 'string' ? flags.dir : undefined,
    });
    for (const c of changes) process.stdout.write(`${c.result}: ${c.file} (${c.what})\n`);
    for (const n of notes) process.stdout.write(`next: ${n}\n`);
    return 0;
  } catch (e) {
    if (!(e instanceof InstallError)) throw e;
    process.stderr.write(`hub-mcp ${command}: ${e.message}\n`);
    return 1;
  }
}

module.exports = { apply, runInstall, InstallError, BIN, hookCommand, HOOKS };
