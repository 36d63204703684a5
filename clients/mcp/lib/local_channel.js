'use strict';
// The local channel between a running hub-mcp server and its CLI's hooks: a
// directory per CLI process that the hook (bin/hub-mcp, plain sh) reads
// without starting Node.js or a gRPC client.
//
//   <root>/<cli pid>/server.pid   the server's pid (the hook checks it lives)
//   <root>/<cli pid>/start.txt    "<seq> <context>": the session-start context,
//                                 kept current, and the last event file it
//                                 counts (the hook shows only later ones)
//   <root>/<cli pid>/session.id   the CLI's session id, when it says
//                                 ($CLAUDE_CODE_SESSION_ID): a hook of another
//                                 session (a claude nested in this one, whose
//                                 own server has no directory yet) prints
//                                 nothing instead of this session's context
//   <root>/<cli pid>/ev/<seq>     one file per new event since the last look
//   <root>/<cli pid>/res.txt      this agent's reservations worth a line, one
//                                 "<show from s> <until s> <w|-> <text>" each
//                                 (lib/reservation_notes.js): the hook shows
//                                 those waited for (w) or past their show-from
//                                 time, with the seconds left until <until>
//   <root>/<cli pid>/state.txt    a state every hook shows while the server
//                                 runs (hub unreachable; roles of a previous
//                                 server not checked yet); absent when none
//   <root>/<cli pid>/down.txt     what every hook shows once the server is not
//                                 running (killed, crashed, stopped): hub is
//                                 unreachable, the roles it held and that
//                                 their status is unknown; kept current
//   <root>/<cli pid>/held.json    {agent_id, hub, roles: [{wire, name,
//                                 epoch}], reservations: [{id, text}]}: the
//                                 roles and reservations held, for the next
//                                 server of the same CLI process, which tells
//                                 the model what became of them
//
// A directory outlives its server: a killed server's hooks then show
// down.txt, and a server stopped normally leaves down.txt saying so. It is
// removed by the next server of the same CLI process, or by any server once
// both its server and its CLI process are gone.
// Text files hold the context already escaped as the inside of a JSON string,
// so the hook only concatenates. Every file is written to a temporary name and
// renamed, so a reader never sees half of one; the hook claims an event file
// by renaming it, so each event is shown once. At most MAX_EVENT_FILES wait;
// older ones are dropped (the inbox tool still lists every message).
//
// <root> is $HUB_MCP_RUNTIME_DIR, else $XDG_RUNTIME_DIR/hub-mcp, else
// /tmp/hub-mcp-<uid>; the hook computes the same.
const fs = require('fs');
const os = require('os');
const path = require('path');

const MAX_EVENT_FILES = 200;

function runtimeRoot(env = process.env) {
  if (env.HUB_MCP_RUNTIME_DIR) return env.HUB_MCP_RUNTIME_DIR;
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, 'hub-mcp');
  return path.join(os.tmpdir(), `hub-mcp-${process.getuid ? process.getuid() : 0}`);
}

// The inside of a JSON string literal for `text`.
function jsonInner(text) {
  return JSON.stringify(text).slice(1, -1);
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

class LocalChannel {
  /**
   * @param {object} o root (default runtimeRoot()), cliPid (default the
   *   parent process: the CLI that started this server).
   */
  constructor({ root = runtimeRoot(), cliPid = process.ppid } = {}) {
    this.root = root;
    this.dir = path.join(root, String(cliPid));
    this.evDir = path.join(this.dir, 'ev');
    this._seq = 0;
    this._tmp = 0;
    this._ok = false;
  }

  /**
   * Creates the directory (0700) and removes those of dead sessions. What a
   * previous, no longer running server of this CLI process left in held.json
   * is kept in `previous` (null when none).
   */
  open() {
    this.previous = null;
    try {
      fs.mkdirSync(this.root, { recursive: true, mode: 0o700 });
      this._sweep();
      this.previous = this._previousHeld();
      fs.rmSync(this.dir, { recursive: true, force: true });
      fs.mkdirSync(this.evDir, { recursive: true, mode: 0o700 });
      const session = process.env.CLAUDE_CODE_SESSION_ID;
      if (session) this._write(path.join(this.dir, 'session.id'), `${session}\n`);
      this._write(path.join(this.dir, 'server.pid'), `${process.pid}\n`);
      this._ok = true;
    } catch (e) {
      process.stderr.write(`hub-mcp: no local channel for hooks (${e.message})\n`);
    }
    return this._ok;
  }

  // A directory stays while its server or its CLI process lives: the hooks
  // of a CLI whose server was killed show what it left (down.txt).
  _sweep() {
    for (const name of fs.readdirSync(this.root)) {
      if (!/^\d+$/.test(name)) continue;
      const dir = path.join(this.root, name);
      let pid = 0;
      try {
        pid = Number(fs.readFileSync(path.join(dir, 'server.pid'), 'utf8'));
      } catch (_) { /* no pid: a dead or half-made directory */ }
      if ((!pid || !alive(pid)) && !alive(Number(name))) fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  // held.json of this directory's previous server, if that server is gone.
  _previousHeld() {
    try {
      const pid = Number(fs.readFileSync(path.join(this.dir, 'server.pid'), 'utf8'));
      if (pid && pid !== process.pid && alive(pid)) return null;
      return JSON.parse(fs.readFileSync(path.join(this.dir, 'held.json'), 'utf8'));
    } catch (_) {
      return null;
    }
  }

  /**
   * Records the roles held ({agent_id, hub, roles}) for a later server of
   * this CLI process, and `down`, what the hooks show once this server is
   * not running.
   */
  setHeld(record, down) {
    if (!this._ok) return;
    try {
      this._write(path.join(this.dir, 'held.json'), `${JSON.stringify(record)}\n`);
      this._write(path.join(this.dir, 'down.txt'), `${jsonInner(down)}\n`);
    } catch (_) { /* the hook then shows its own line */ }
  }

  /** Replaces the state every hook shows while the server runs ("" for none). */
  setState(text) {
    if (!this._ok) return;
    const file = path.join(this.dir, 'state.txt');
    try {
      if (text) this._write(file, `${jsonInner(text)}\n`);
      else fs.rmSync(file, { force: true });
    } catch (_) { /* the hook then shows nothing of it */ }
  }

  _write(file, text) {
    this._tmp += 1;
    const tmp = `${file}.tmp${process.pid}.${this._tmp}`;
    fs.writeFileSync(tmp, text, { mode: 0o600 });
    fs.renameSync(tmp, file);
  }

  /**
   * Replaces the session-start context ("" for none), which must count
   * every event added so far (the hook drops those, and shows later ones).
   */
  setStartContext(text) {
    if (!this._ok) return;
    try {
      this._write(path.join(this.dir, 'start.txt'), `${this._seq} ${jsonInner(text)}`);
    } catch (_) { /* the hook then shows nothing */ }
  }

  /**
   * Replaces the reservation records the hooks read: {showFromS, untilS,
   * waited, text} each (none: the file is removed).
   */
  setReservationNotes(notes) {
    if (!this._ok) return;
    const file = path.join(this.dir, 'res.txt');
    try {
      if (notes.length === 0) {
        fs.rmSync(file, { force: true });
        return;
      }
      this._write(file, notes.map((n) =>
        `${n.showFromS} ${n.untilS} ${n.waited ? 'w' : '-'} ${jsonInner(n.text.replace(/[\r\n]+/g, ' '))}\n`).join(''));
    } catch (_) { /* the hook then shows nothing of them */ }
  }

  /**
   * Adds one event line for the next UserPromptSubmit / PostToolUse hook.
   * A `keep` event (a role gained or lost) is always shown, whatever the
   * hook's cap or the start context counts, and never pruned.
   */
  addEvent(line, { keep = false } = {}) {
    if (!this._ok) return;
    this._seq += 1;
    this._tmp += 1;
    // Written beside ev/ and renamed into it: the hook claims ev/ as a whole
    // by renaming it, and a file renamed in before that is part of the claim.
    const tmp = path.join(this.dir, `ev.tmp${process.pid}.${this._tmp}`);
    const target = path.join(this.evDir, String(this._seq).padStart(12, '0') + (keep ? 'r' : ''));
    try {
      fs.writeFileSync(tmp, jsonInner(line.endsWith('\n') ? line : line + '\n'), { mode: 0o600 });
      try {
        fs.renameSync(tmp, target);
      } catch (e) {
        if (e.code !== 'ENOENT') throw e;
        fs.mkdirSync(this.evDir, { recursive: true, mode: 0o700 });
        fs.renameSync(tmp, target);
      }
      if (this._seq % 20 === 0) this._prune();
    } catch (_) {
      fs.rmSync(tmp, { force: true });  // best effort: the inbox tool is the record
    }
  }

  _prune() {
    const files = fs.readdirSync(this.evDir).filter((f) => /^\d{12}$/.test(f)).sort();
    for (const f of files.slice(0, Math.max(0, files.length - MAX_EVENT_FILES))) {
      fs.rmSync(path.join(this.evDir, f), { force: true });
    }
  }

  /**
   * The server is stopping: what it showed while running goes, `down` is
   * what the hooks show from now on (server.pid stays: the hook checks it),
   * and held.json stays for the next server of this CLI process. Without
   * `down` the directory is removed.
   */
  close(down) {
    if (!this._ok) return;
    if (!down) {  // nothing to say: the directory goes
      this._ok = false;
      fs.rmSync(this.dir, { recursive: true, force: true });
      return;
    }
    try {
      for (const f of ['start.txt', 'res.txt', 'state.txt']) fs.rmSync(path.join(this.dir, f), { force: true });
      this._write(path.join(this.dir, 'down.txt'), `${jsonInner(down)}\n`);
    } catch (_) { /* nothing to do */ }
    this._ok = false;
  }
}

module.exports = { LocalChannel, runtimeRoot, jsonInner, MAX_EVENT_FILES };
