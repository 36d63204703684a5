'use strict';
// A fleet of three sessions on one project, end to end: three real hub-mcp
// processes (the MCP SDK's Client over stdio) against a real hubd, each with
// the real Claude Code hook beside it. A messages B; A becomes cto; B and C
// are candidates; A's server is SIGKILLed; B takes the role over within the
// detach grace plus the probe time, B's next hook says so, and a message sent
// to the cto in the gap reaches B.
//
// Each session stands for one CLI process. The hook finds its server through
// the directory named after the CLI's pid (lib/local_channel.js); here every
// server's parent is this test process, so each session gets its own runtime
// root instead (as distinct CLI pids would give distinct directories), and
// the hook, a child of this process like the server, is run with that root
// and the session's id in its input, as Claude Code runs it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { Hubd, freshDbPath, HubClient, startMcp, waitFor, attached, exited, runHook, tmpDir } =
  require('./harness');

const PROJECT = 'prj_FleetFleetFleetFleetFl';
const GRACE_MS = 1000;
const PROBE_TIMEOUT_MS = 10000;  // registry/activation_policy.h: probe_timeout, bounds a wake

let hubd;
let hub;
const sessions = [];

test.before(async () => {
  hubd = await Hubd.start({ dbPath: freshDbPath('fleet'), args: [`--detach_grace=${GRACE_MS}ms`] });
  hub = new HubClient(hubd.address);
});
test.after(async () => {
  for (const s of sessions) await s.mcp.close();
  hub.close();
  await hubd.stop();
});

/** One session: its server, its runtime root and its CLI session id. */
async function session(name) {
  const root = tmpDir(`fleet-${name}`);
  const sessionId = `fleet-session-${name}`;
  const env = { HUB_MCP_RUNTIME_DIR: root, CLAUDE_CODE_SESSION_ID: sessionId };
  const mcp = await startMcp({ hub: hubd.address, agentId: `fleet-${name}`, project: PROJECT, env });
  const s = {
    name, mcp, root, agentId: `fleet-${name}`,
    call: (tool, args) => mcp.call(tool, args),
    hook: (event = 'PostToolUse') => runHook(event, { HUB_MCP_RUNTIME_DIR: root }, sessionId),
    // The events waiting for this session's next hook, read without claiming them.
    waiting() {
      const ev = path.join(root, String(process.pid), 'ev');
      if (!fs.existsSync(ev)) return [];
      return fs.readdirSync(ev).sort().map((f) => {
        try { return JSON.parse(`"${fs.readFileSync(path.join(ev, f), 'utf8')}"`); } catch (_) { return ''; }
      });
    },
  };
  sessions.push(s);
  return s;
}

function ok(r) {
  assert.equal(r.isError, undefined, JSON.stringify(r));
  return r.structuredContent;
}

function hookContext(r, event = 'PostToolUse') {
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.hookSpecificOutput.hookEventName, event);
  return out.hookSpecificOutput.additionalContext;
}

/** Runs the hook once every event matching `patterns` waits for it. */
async function hookOnce(s, what, patterns) {
  await waitFor(what, () => patterns.every((p) => s.waiting().some((line) => p.test(line))));
  return hookContext(await s.hook());
}

const roleOf = async () => (await hub.roles.getRole({ roleKey: { projectId: PROJECT, kind: 'ROLE_KIND_CTO' } })).role;

test('three sessions: a message, a cto, a crash, a failover B sees from inside', async (t) => {
  const a = await session('a');
  const b = await session('b');
  const c = await session('c');
  for (const s of [a, b, c]) assert.equal((await attached(s.mcp)).project_id, PROJECT);

  // A -> B: pushed, shown by B's hook, in B's inbox, acknowledged.
  const sent = ok(await a.call('hub_send', { to: b.agentId, text: 'review the parser\ndetails follow',
    type: 'request', priority: 7 }));
  const line = await hookOnce(b, 'the message for B\'s hook', [new RegExp(sent.message_id)]);
  assert.equal(line, 'hub: new since your last look:\n' +
    `hub message: message ${sent.message_id} from fleet-a [request, priority 7, correlation ` +
    `${sent.correlation_id}]: review the parser\n`);
  const inbox = ok(await b.call('hub_inbox', {}));
  assert.deepEqual(inbox.messages.map((m) => [m.message_id, m.from, m.text]),
    [[sent.message_id, 'fleet-a', 'review the parser\ndetails follow']]);
  assert.deepEqual(ok(await b.call('hub_ack', { message_ids: [sent.message_id] })).acked, [sent.message_id]);
  assert.equal(ok(await a.call('hub_message_status', { message_id: sent.message_id })).status, 'acked');
  assert.equal(ok(await b.call('hub_inbox', {})).messages.length, 0);

  // A becomes cto: candidacy, ensure, activation acknowledged by A's session.
  assert.equal(ok(await a.call('hub_role_candidacy', { role: 'cto', candidate: true, priority: 10 })).candidate, true);
  const ensure = ok(await a.call('hub_role_ensure', { role: 'cto', cause: 'fleet test' }));
  assert.equal(ensure.accepted, true, JSON.stringify(ensure));
  const heldByA = await waitFor('A holds cto', async () =>
    ok(await a.call('hub_whoami')).roles.find((r) => r.role === 'cto' && r.project_id === PROJECT));
  assert.equal(heldByA.fencing_token, heldByA.epoch);
  const meA = ok(await a.call('hub_whoami'));
  assert.ok(meA.activations.some((x) => x.epoch === heldByA.epoch && x.status === 'acked'),
    JSON.stringify(meA.activations));
  let role = await roleOf();
  assert.deepEqual([role.state, role.holderAgentId, role.epoch, role.charterAckedEpoch],
    ['ROLE_STATE_ACTIVE', a.agentId, heldByA.epoch, heldByA.epoch]);
  assert.match(hookContext(await a.hook('UserPromptSubmit'), 'UserPromptSubmit'),
    new RegExp(`hub role: you are now cto of ${PROJECT} at epoch ${heldByA.epoch}; fencing token ${heldByA.epoch}`));

  // B and C are candidates behind A.
  ok(await b.call('hub_role_candidacy', { role: 'cto', candidate: true, priority: 5 }));
  ok(await c.call('hub_role_candidacy', { role: 'cto', candidate: true, priority: 1 }));
  assert.deepEqual(ok(await c.call('hub_role_candidates', { role: 'cto' })).candidates.map((x) => x.agent_id),
    [a.agentId, b.agentId, c.agentId]);
  await b.hook();  // B has seen everything so far
  await c.hook();

  // A's server dies without a goodbye.
  const t0 = Date.now();
  process.kill(a.mcp.pid, 'SIGKILL');
  await exited(a.mcp);
  // In the gap: C writes to the cto while B does not hold it yet.
  const gap = ok(await c.call('hub_send', { to: 'cto', text: 'the release is blocked on you' }));
  role = await roleOf();
  assert.ok(!(role.state === 'ROLE_STATE_ACTIVE' && role.holderAgentId === b.agentId),
    `the message was sent in the gap (role then: ${role.state} held by ${role.holderAgentId})`);

  const heldByB = await waitFor('B holds cto', async () =>
    ok(await b.call('hub_whoami')).roles.find((r) => r.role === 'cto'), GRACE_MS + PROBE_TIMEOUT_MS + 5000);
  const tookMs = Date.now() - t0;
  t.diagnostic(`failover: B active ${tookMs} ms after A's SIGKILL (grace ${GRACE_MS} ms)`);
  assert.ok(tookMs < GRACE_MS + PROBE_TIMEOUT_MS, `${tookMs} ms`);
  // Taking the role from A fences A's epoch (a reservation with no holder),
  // and activating B is the next one.
  assert.equal(heldByB.epoch, heldByA.epoch + 2);
  assert.equal(heldByB.fencing_token, heldByB.epoch);
  role = await roleOf();
  assert.deepEqual([role.state, role.holderAgentId, role.epoch], ['ROLE_STATE_ACTIVE', b.agentId, heldByB.epoch]);

  // B's next hook says it holds the role, and shows the message of the gap.
  const told = await hookOnce(b, 'the role and the gap message for B\'s hook',
    [/^hub role: you are now cto/, new RegExp(gap.message_id)]);
  assert.ok(told.includes(`hub role: you are now cto of ${PROJECT} at epoch ${heldByB.epoch}; fencing token ` +
    `${heldByB.epoch} (acknowledged by hub-mcp on receipt)\n`), told);
  assert.ok(told.includes(`hub message: message ${gap.message_id} from fleet-c [event, priority 5]: ` +
    'the release is blocked on you\n'), told);
  const got = ok(await b.call('hub_inbox', {})).messages;
  assert.deepEqual(got.map((m) => [m.message_id, m.from, m.text]),
    [[gap.message_id, 'fleet-c', 'the release is blocked on you']]);
  assert.equal(ok(await b.call('hub_whoami')).roles[0].epoch, heldByB.epoch);

  // C, a candidate too, learns who holds the role now.
  const cLine = await hookOnce(c, 'the new holder for C\'s hook', [/is now held by fleet-b/]);
  assert.ok(cLine.includes(`hub role: cto of ${PROJECT} is now held by fleet-b at epoch ${heldByB.epoch}\n`), cLine);
});
