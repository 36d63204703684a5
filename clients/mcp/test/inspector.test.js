'use strict';
// The MCP Inspector's CLI (a client hub-mcp did not write) lists the tools
// and calls one against the real hubd.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const { execFile } = require('child_process');
const { Hubd, freshDbPath, BIN, RUNTIME_DIR } = require('./harness');
const { TOOLS } = require('../lib/tools');

function inspector(args) {
  const modules = process.env.HUB_MCP_MODULES || process.env.NODE_PATH.split(':')[0];
  const build = path.join(modules, '@modelcontextprotocol', 'inspector-cli', 'build');
  // inspector-cli 1.0.3 looks for its package.json relative to the working
  // directory: run it from its own build directory.
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [path.join(build, 'index.js'), ...args], { cwd: build, timeout: 60000,
      env: { ...process.env, HUB_MCP_RUNTIME_DIR: RUNTIME_DIR } }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${error.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

test('inspector-cli lists the tools and calls hub_send and hub_whoami', async () => {
  const hubd = await Hubd.start({ dbPath: freshDbPath('inspector') });
  try {
    const server = [BIN, '--client=claude', `--hub=${hubd.address}`, '--agent-id=mcp-inspector'];
    const list = await inspector([...server, '--method', 'tools/list']);
    assert.ok(list.tools.some((t) => t.name === 'hub_whoami'));
    // Every tool hub-mcp defines, as a client we did not write sees them.
    assert.equal(list.tools.length, TOOLS.length);
    for (const name of ['hub_assign', 'hub_job_status', 'hub_list_jobs', 'hub_cancel_job', 'hub_retry_job',
      'hub_claim_job', 'hub_job_progress', 'hub_complete_job', 'hub_fail_job']) {
      assert.ok(list.tools.some((t) => t.name === name), name);
    }
    const sent = await inspector([...server, '--method', 'tools/call', '--tool-name', 'hub_send',
      '--tool-arg', 'to=someone-else', '--tool-arg', 'text=hi']);
    assert.equal(sent.isError, undefined, JSON.stringify(sent));
    assert.equal(sent.structuredContent.recipient_count, 1);
    const bad = await inspector([...server, '--method', 'tools/call', '--tool-name', 'hub_send',
      '--tool-arg', 'to=someone-else', '--tool-arg', 'priority=12']);
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /^PRIORITY_INVALID: /);
  } finally {
    await hubd.stop();
  }
});
