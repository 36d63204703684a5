'use strict';
// Measures `hub-mcp hook` wall time (spawn to exit) over RUNS runs per case,
// against a real hubd and a hub-mcp holding 100 pending messages:
//   HUBD=bazel-bin/hub/hubd NODE_PATH=$HUB_MCP_MODULES node clients/mcp/test/bench_hook.js [RUNS]
const { Hubd, freshDbPath, HubClient, startMcp, waitFor, attached, exited, runHook, tmpDir } = require('./harness');
const { LocalChannel } = require('../lib/local_channel');

const RUNS = Number(process.argv[2] || 200);

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function measure(name, make) {
  const ms = [];
  for (let i = 0; i < RUNS; i++) {
    const r = await make(i);
    if (r.code !== 0) throw new Error(`${name}: exit ${r.code}`);
    ms.push(r.ms);
  }
  ms.sort((a, b) => a - b);
  console.log(`${name}: runs=${RUNS} p50=${pct(ms, 50).toFixed(1)} ms p99=${pct(ms, 99).toFixed(1)} ms max=${ms[ms.length - 1].toFixed(1)} ms`);
}

(async () => {
  const hubd = await Hubd.start({ dbPath: freshDbPath('bench') });
  const hub = new HubClient(hubd.address);
  const m = await startMcp({ hub: hubd.address, agentId: 'mcp-bench' });
  await attached(m);
  for (let i = 0; i < 100; i++) {
    await hub.messages.publish({ fromAgentId: 'bench', to: 'mcp-bench', payload: { fields: { text: { stringValue: `m${i}` } } } });
  }
  await waitFor('100 pushed', async () => (await m.call('hub_whoami')).structuredContent.pending_messages === 100);
  await measure('SessionStart (100 pending)', () => runHook('SessionStart'));
  await measure('PostToolUse (one new message each run)', async (i) => {
    await hub.messages.publish({ fromAgentId: 'bench', to: 'mcp-bench', payload: { fields: { text: { stringValue: `n${i}` } } } });
    await waitFor('the event file', async () => (await m.call('hub_whoami')).structuredContent.pending_messages === 101 + i);
    return runHook('PostToolUse');
  });
  await measure('UserPromptSubmit (nothing new)', () => runHook('UserPromptSubmit'));
  const gone = exited(m);
  process.kill(m.pid, 'SIGKILL');
  await gone;
  await measure('SessionStart (server gone)', () => runHook('SessionStart'));
  // The reservation lines' cost (lib/reservation_notes.js): a channel holding
  // 100 records, all due, half of them waited for (3 lines and "97 more").
  const root = tmpDir('bench-res');
  const channel = new LocalChannel({ root, cliPid: process.pid });
  channel.open();
  const now = Math.floor(Date.now() / 1000);
  channel.setReservationNotes(Array.from({ length: 100 }, (_, i) => ({ showFromS: now - 10,
    untilS: now + 3600, waited: i % 2 === 0, text: `long/f${i}.cc (exclusive, 019ad-${i}, fencing token ${i})` })));
  await measure('PostToolUse (100 reservation records due)', () => runHook('PostToolUse', { HUB_MCP_RUNTIME_DIR: root }));
  channel.close();
  hub.close();
  await hubd.stop();
})().catch((e) => { console.error(e); process.exit(1); });
