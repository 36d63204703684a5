'use strict';
// A throw-away PostgreSQL 15 server for the console's shared-store test, as
// tests/e2e/hubtest.py's Postgres does: initdb into a fresh directory under
// /tmp, listening only on a Unix socket there, run as `nobody` when the test
// runs as root (PostgreSQL refuses root; the Bazel target is no-sandbox).
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const BIN = '/usr/lib/postgresql/15/bin/';

class Postgres {
  constructor() {
    this.dir = fs.mkdtempSync(path.join('/tmp', 'hub-pg-console.'));
    this.root = process.getuid() === 0;
    if (this.root) {
      const nobody = Number(execFileSync('id', ['-u', 'nobody']).toString());
      const nogroup = Number(execFileSync('id', ['-g', 'nobody']).toString());
      fs.chownSync(this.dir, nobody, nogroup);
    }
    this.run('initdb', '-D', `${this.dir}/data`, '-A', 'trust', '-U', 'hub', '-E', 'UTF8',
      '--locale=C.UTF-8', '--no-sync');
    this.run('pg_ctl', '-D', `${this.dir}/data`, '-l', `${this.dir}/server.log`, '-o',
      `-c listen_addresses= -c unix_socket_directories=${this.dir} -c fsync=off ` +
      '-c full_page_writes=off -c synchronous_commit=off', '-w', '-t', '60', 'start');
  }

  run(program, ...args) {
    const prefix = this.root ? ['/usr/bin/setpriv', '--reuid=nobody', '--regid=nogroup',
      '--clear-groups'] : [];
    const [cmd, ...rest] = [...prefix, BIN + program, ...args];
    return execFileSync(cmd, rest, { cwd: this.dir, timeout: 120000, stdio: 'pipe' }).toString();
  }

  createDatabase(name) {
    this.run('createdb', '-h', this.dir, '-U', 'hub', name);
    return `postgresql://hub@/${name}?host=${this.dir}`;
  }

  // The rows of `query` in database `name`, as psql's unaligned text.
  sql(name, query) {
    return this.run('psql', '-h', this.dir, '-U', 'hub', '-d', name, '-X', '-A', '-t', '-c',
      query).trim();
  }

  stop() {
    try {
      if (fs.existsSync(`${this.dir}/data/postmaster.pid`)) {
        this.run('pg_ctl', '-D', `${this.dir}/data`, '-m', 'immediate', '-w', 'stop');
      }
    } finally {
      fs.rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

module.exports = { Postgres, tmpdir: os.tmpdir };
