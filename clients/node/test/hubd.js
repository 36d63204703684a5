'use strict';
// Starts the real hubd binary ($HUBD) for the tests: a loopback port and a
// database under $TEST_TMPDIR (or the OS temp dir).
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const SERVING = /serving on (\S+) db=(\S+) hub_instance_id=(\S+)/;

function hubdPath() {
  const p = process.env.HUBD;
  if (!p) throw new Error('HUBD must name the hubd binary (the Bazel test passes it)');
  return path.resolve(p);
}

function freshDbPath(name) {
  const dir = fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || os.tmpdir(), 'hub-node-'));
  return path.join(dir, `${name}.sqlite`);
}

class Hubd {
  /** Starts hubd; resolves once it prints its serving line. */
  static start({ dbPath, listen = '127.0.0.1:0', args = [] }) {
    const hubd = new Hubd();
    hubd.dbPath = dbPath;
    hubd.output = '';
    hubd.proc = spawn(hubdPath(), [`--listen=${listen}`, `--db=${dbPath}`, ...args],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    hubd.exited = new Promise((resolve) => hubd.proc.once('exit', (code, signal) =>
      resolve({ code, signal })));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        hubd.proc.kill('SIGKILL');
        reject(new Error('hubd did not start within 60 s: ' + hubd.output));
      }, 60000);
      const onData = (chunk) => {
        hubd.output += chunk.toString();
        const m = SERVING.exec(hubd.output);
        if (m) {
          clearTimeout(timer);
          [, hubd.address, hubd.storePath, hubd.instanceId] = m;
          resolve(hubd);
        }
      };
      hubd.proc.stdout.on('data', onData);
      hubd.proc.stderr.on('data', (chunk) => { hubd.output += chunk.toString(); });
      hubd.proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`hubd exited early (${code}): ${hubd.output}`));
      });
    });
  }

  /** Stops hubd with `signal` and resolves with its exit. */
  async stop(signal = 'SIGTERM') {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill(signal);
    return this.exited;
  }

  /** A new hubd on the same port and database (after stop()). */
  restart(args = []) {
    return Hubd.start({ dbPath: this.dbPath, listen: this.address, args });
  }
}

/** Resolves with the arguments of the next `event` of `emitter`. */
function once(emitter, event, timeoutMs = 20000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.removeListener(event, handler);
      reject(new Error(`no '${event}' event within ${timeoutMs} ms`));
    }, timeoutMs);
    function handler(...args) {
      clearTimeout(timer);
      resolve(args);
    }
    emitter.once(event, handler);
  });
}

module.exports = { Hubd, freshDbPath, once };
