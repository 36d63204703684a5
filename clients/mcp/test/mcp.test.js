'use strict';
// hub-mcp against the real hubd, through the MCP SDK's Client over stdio.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const { Hubd, freshDbPath, HubClient, startMcp, waitFor, attached, exited, BIN, PROJECT } = require('./harness');

let hubd;
let hub;
const open = [];

test.before(async () => {
  hubd = await Hubd.start({ dbPath: freshDbPath('mcp'), args: ['--detach_grace=300ms'] });
  hub = new HubClient(hubd.address);
});
test.after(async () => {
  for (const m of open) await m.close();
  hub.close();
  await hubd.stop();
});

async function mcp(agentId, extra = {}) {
  const m = await startMcp({ hub: hubd.address, agentId, ...extra });
  open.push(m);
  return m;
}

// Sessions for these agent ids, each attached (its whoami).
async function attachedSessions(ids, extra = {}) {
  const sessions = [];
  for (const id of ids) sessions.push(await mcp(id, extra));
  const whoami = [];
  for (const m of sessions) whoami.push(await attached(m));
  return { sessions, whoami };
}

const errorText = (r) => { assert.equal(r.isError, true, JSON.stringify(r)); return r.content[0].text; };

test('lists every tool with hub_ names and schemas that carry hub\'s bounds', async () => {
  const a = await mcp('mcp-tools');
  const { tools } = await a.client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const name of ['hub_whoami', 'hub_list_agents', 'hub_send', 'hub_inbox', 'hub_ack', 'hub_ask',
    'hub_reply', 'hub_message_status', 'hub_role_get', 'hub_role_list', 'hub_role_candidates',
    'hub_role_candidacy', 'hub_role_ensure', 'hub_role_ack_activation', 'hub_role_step_down',
    'hub_reserve', 'hub_release', 'hub_reservations', 'hub_check_paths', 'hub_assign', 'hub_job_status',
    'hub_list_jobs', 'hub_cancel_job', 'hub_retry_job', 'hub_claim_job', 'hub_job_progress',
    'hub_complete_job', 'hub_fail_job']) {
    assert.ok(byName[name], `tool ${name}`);
    assert.equal(byName[name].inputSchema.type, 'object');
  }
  for (const t of tools) assert.match(t.name, /^hub_[a-z_]+$/);
  const send = byName.hub_send.inputSchema.properties;
  assert.deepEqual([send.priority.minimum, send.priority.maximum], [1, 9]);
  assert.deepEqual([send.ttl_seconds.minimum, send.ttl_seconds.maximum], [1, 86400]);
  assert.equal(byName.hub_ask.inputSchema.properties.question.maxLength, 20000);
  assert.equal(byName.hub_ask.inputSchema.properties.wait_seconds.maximum, 30);
  assert.equal(byName.hub_inbox.inputSchema.properties.limit.maximum, 100);
  assert.equal(byName.hub_ack.inputSchema.properties.message_ids.maxItems, 100);
  assert.equal(byName.hub_list_agents.inputSchema.properties.page_size.maximum, 1000);
  assert.equal(byName.hub_reserve.inputSchema.properties.patterns.maxItems, 10000);
  assert.equal(byName.hub_check_paths.inputSchema.properties.paths.maxItems, 10000);
  const assign = byName.hub_assign.inputSchema.properties;
  assert.equal(assign.task.maxLength, 20000);
  assert.deepEqual([assign.priority.minimum, assign.priority.maximum], [1, 9]);
  assert.deepEqual([assign.timeout_seconds.minimum, assign.timeout_seconds.maximum], [1, 86400]);
  assert.deepEqual([assign.max_attempts.minimum, assign.max_attempts.maximum], [1, 100]);
  assert.equal(assign.pool_capabilities.maxItems, 32);
  assert.deepEqual(byName.hub_assign.inputSchema.required, ['task']);
  // The worker tools need the job id only: hub-mcp names the attempt.
  for (const name of ['hub_job_progress', 'hub_complete_job']) {
    assert.deepEqual(byName[name].inputSchema.required, ['job_id'], name);
  }
  assert.deepEqual(byName.hub_fail_job.inputSchema.required, ['job_id', 'reason']);
});

test('whoami: agent id, generation, hub identity, project', async () => {
  const a = await mcp('mcp-whoami');
  const me = await attached(a);
  assert.equal(me.agent_id, 'mcp-whoami');
  assert.ok(me.presence_generation >= 1);
  assert.equal(me.project_id, PROJECT);
  assert.equal(me.hub.instance_id, hubd.instanceId);
  assert.deepEqual(me.roles, []);
  const { agent } = await hub.presence.getAgent({ agentId: 'mcp-whoami' });
  assert.equal(agent.cli, 'AGENT_CLI_CLAUDE');
  assert.equal(agent.streamAttached, true);
  assert.equal(agent.projectId, PROJECT);
});

test('A sends to B; B sees it pushed and in its inbox, acks it; A sees it acked', async () => {
  const a = await mcp('mcp-send-a');
  const b = await mcp('mcp-send-b');
  await attached(a);
  await attached(b);
  const sent = await a.call('hub_send', { to: 'mcp-send-b', text: 'build is red\nsecond line', type: 'handoff',
    priority: 8, ttl_seconds: 600, correlation_id: 'corr-1', trace_id: 'trace-1' });
  assert.equal(sent.isError, undefined, JSON.stringify(sent));
  assert.equal(sent.structuredContent.recipient_count, 1);
  const id = sent.structuredContent.message_id;
  await waitFor('the push', async () => (await b.call('hub_whoami')).structuredContent.pending_messages === 1);
  await waitFor('a notification', () => b.notifications.some((n) => n.method === 'notifications/message' &&
    String(n.params.data).includes(id)));
  const inbox = await b.call('hub_inbox', {});
  assert.equal(inbox.structuredContent.messages.length, 1);
  const m = inbox.structuredContent.messages[0];
  assert.deepEqual([m.message_id, m.from, m.type, m.priority, m.text, m.correlation_id, m.trace_id],
    [id, 'mcp-send-a', 'handoff', 8, 'build is red\nsecond line', 'corr-1', 'trace-1']);
  let status = await a.call('hub_message_status', { message_id: id });
  assert.equal(status.structuredContent.status, 'delivered');
  assert.equal(status.structuredContent.recipient.present, true);
  const ack = await b.call('hub_ack', { message_ids: [id, '01234567-0000-7000-8000-000000000000'] });
  assert.deepEqual(ack.structuredContent.acked, [id]);
  assert.equal(ack.structuredContent.ignored.length, 1);
  assert.equal((await b.call('hub_inbox', {})).structuredContent.messages.length, 0);
  status = await a.call('hub_message_status', { message_id: id });
  assert.equal(status.structuredContent.status, 'acked');
  const list = await a.call('hub_list_agents', { status: ['online'] });
  const ids = list.structuredContent.agents.map((x) => x.agent_id);
  assert.ok(ids.includes('mcp-send-a') && ids.includes('mcp-send-b'), ids.join(','));
});

test('inbox orders by priority, then age; topics reach subscribers', async () => {
  const a = await mcp('mcp-order-a');
  const b = await mcp('mcp-order-b', { args: ['--topics=builds'] });
  await attached(a);
  await attached(b);
  for (const [text, priority] of [['low', 2], ['high', 9], ['mid', 5], ['high2', 9]]) {
    await a.call('hub_send', { to: 'mcp-order-b', text, priority });
  }
  await a.call('hub_send', { to: 'topic:builds', text: 'topic msg', priority: 1 });
  const inbox = await waitFor('five messages', async () => {
    const r = await b.call('hub_inbox', {});
    return r.structuredContent.messages.length === 5 ? r : null;
  });
  assert.deepEqual(inbox.structuredContent.messages.map((m) => m.text), ['high', 'high2', 'mid', 'low', 'topic msg']);
  const bySubscribers = await a.call('hub_list_agents', { topic: 'builds' });
  assert.deepEqual(bySubscribers.structuredContent.agents.map((x) => x.agent_id), ['mcp-order-b']);
});

test('ask waits for the reply the other agent sends', async () => {
  const a = await mcp('mcp-ask-a');
  const b = await mcp('mcp-ask-b');
  await attached(a);
  await attached(b);
  const asking = a.call('hub_ask', { to: 'mcp-ask-b', question: 'which branch?', wait_seconds: 20 });
  const request = await waitFor('the request', async () => {
    const r = await b.call('hub_inbox', {});
    return r.structuredContent.messages.find((m) => m.type === 'request');
  });
  assert.equal(request.text, 'which branch?');
  const reply = await b.call('hub_reply', { to: request.from, correlation_id: request.correlation_id,
    text: 'wip/mcp', ack_message_id: request.message_id });
  assert.deepEqual(reply.structuredContent.acked, [request.message_id]);
  const answer = await asking;
  assert.equal(answer.structuredContent.state, 'answered', JSON.stringify(answer));
  assert.equal(answer.structuredContent.answer.text, 'wip/mcp');
  const noWait = await a.call('hub_ask', { to: 'mcp-ask-b', question: 'q', wait_seconds: 0 });
  assert.equal(noWait.structuredContent.state, 'queued');
});

test('bad arguments are refused with hub\'s reason codes; hub refusals lead with theirs', async () => {
  const a = await mcp('mcp-bad');
  await attached(a);
  const cases = [
    [{ to: 'x-agent', priority: 0 }, /^PRIORITY_INVALID: /],
    [{ to: 'x-agent', priority: 10 }, /^PRIORITY_INVALID: /],
    [{ to: 'x-agent', ttl_seconds: 0 }, /^TTL_INVALID: /],
    [{ to: 'x-agent', ttl_seconds: 86401 }, /^TTL_INVALID: /],
    [{ to: 'x-agent', type: 'system' }, /^MESSAGE_TYPE_INVALID: /],
    [{ text: 'no address' }, /^MESSAGE_ADDRESS_INVALID: /],
    [{ to: 'x-agent', bogus: 1 }, /^REQUEST_INVALID: bogus is not an argument/],
    [{ to: 'x-agent', correlation_id: 'has space' }, /^REQUEST_INVALID: /],
    [{ to: 'topic:' }, /^(TOPIC_INVALID|MESSAGE_ADDRESS_INVALID): .*What to do: /],
    [{ to: 'ab' }, /^(AGENT_ID_INVALID|MESSAGE_ADDRESS_INVALID): /],
  ];
  for (const [args, want] of cases) {
    const r = await a.call('hub_send', args);
    assert.match(errorText(r), want, JSON.stringify(args));
    assert.ok(r.structuredContent.error.reason);
  }
  assert.match(errorText(await a.call('hub_ask', { to: 'x-agent', question: 'q'.repeat(20001) })), /^REQUEST_INVALID: question/);
  assert.match(errorText(await a.call('hub_ask', { to: 'x-agent', question: 'q', wait_seconds: 31 })), /^REQUEST_INVALID: wait_seconds/);
  assert.match(errorText(await a.call('hub_ack', { message_ids: [] })), /^MESSAGE_ID_INVALID: /);
  assert.match(errorText(await a.call('hub_ack', { message_ids: Array.from({ length: 101 }, (_, i) => `m${i}`) })), /^MESSAGE_ID_INVALID: /);
  assert.match(errorText(await a.call('hub_inbox', { limit: 101 })), /^REQUEST_INVALID: limit/);
  assert.match(errorText(await a.call('hub_inbox', { page_token: 'garbage' })), /^PAGE_TOKEN_INVALID: /);
  assert.match(errorText(await a.call('hub_role_get', { role: 'cto', project_id: 'prj_short' })), /^PROJECT_ID_INVALID: /);
  assert.match(errorText(await a.call('hub_role_get', { role: 'lead' })), /^SCOPE_REQUIRED: /);
  assert.match(errorText(await a.call('hub_role_get', { role: 'boss' })), /^ROLE_KIND_UNSUPPORTED: /);
  assert.match(errorText(await a.call('hub_role_get', { role: 'lead', scope_id: 'scp_AAAAAAAAAAAAAAAAAAAAAA' })),
    /^ROLE_NOT_FOUND: role 'rk2\.[^']+' not found\. What to do: /);
  assert.match(errorText(await a.call('hub_message_status', { message_id: 'nope' })), /^MESSAGE_NOT_FOUND: /);
  assert.match(errorText(await a.call('hub_role_ack_activation', {})), /^ACTIVATION_NOT_FOUND: /);
  assert.match(errorText(await a.call('hub_no_such_tool', {})), /^TOOL_UNKNOWN: /);
  // Still alive and serving after all that.
  assert.equal((await a.call('hub_whoami')).structuredContent.agent_id, 'mcp-bad');
});

test('A holds the cto role with its epoch; after A is SIGKILLed, candidate B takes it after the grace', async () => {
  const project = 'prj_ROLEtestROLEtestROLEte';
  const a = await mcp('mcp-role-a', { project });
  const b = await mcp('mcp-role-b', { project });
  await attached(a);
  await attached(b);
  const cand = await a.call('hub_role_candidacy', { role: 'cto', candidate: true, priority: 10 });
  assert.equal(cand.isError, undefined, JSON.stringify(cand));
  const ensure = await a.call('hub_role_ensure', { role: 'cto', cause: 'test' });
  assert.equal(ensure.isError, undefined, JSON.stringify(ensure));
  const heldByA = await waitFor('A holds cto', async () => {
    const me = (await a.call('hub_whoami')).structuredContent;
    return me.roles.find((r) => r.role === 'cto' && r.project_id === project);
  });
  assert.ok(heldByA.epoch >= 1);
  assert.equal(heldByA.fencing_token, heldByA.epoch);
  const role = await a.call('hub_role_get', { role: 'cto' });
  assert.deepEqual([role.structuredContent.state, role.structuredContent.holder_agent_id, role.structuredContent.epoch],
    ['active', 'mcp-role-a', heldByA.epoch]);
  assert.equal((await b.call('hub_role_candidacy', { role: 'cto', candidate: true, priority: 1 })).isError, undefined);
  const cands = await b.call('hub_role_candidates', { role: 'cto' });
  assert.deepEqual(cands.structuredContent.candidates.map((c) => c.agent_id), ['mcp-role-a', 'mcp-role-b']);
  const listed = await b.call('hub_role_list', {});
  assert.equal(listed.structuredContent.roles.length, 1);

  process.kill(a.pid, 'SIGKILL');
  await exited(a);
  const heldByB = await waitFor('B holds cto', async () => {
    const me = (await b.call('hub_whoami')).structuredContent;
    return me.roles.find((r) => r.role === 'cto');
  });
  assert.ok(heldByB.epoch > heldByA.epoch, `${heldByB.epoch} > ${heldByA.epoch}`);
  await waitFor('the role announced to B', () => b.notifications.some((n) =>
    String(n.params && n.params.data).includes(`you are now cto of ${project} at epoch ${heldByB.epoch}`)));
  // Stopping candidacy is recorded and does not step down.
  const stop = await b.call('hub_role_candidacy', { role: 'cto', candidate: false });
  assert.equal(stop.structuredContent.removed, true, JSON.stringify(stop));
  const left = await b.call('hub_role_candidates', { role: 'cto' });
  assert.deepEqual(left.structuredContent.candidates.map((c) => c.agent_id), ['mcp-role-a']);
  assert.equal((await b.call('hub_role_get', { role: 'cto' })).structuredContent.holder_agent_id, 'mcp-role-b');
});

test('with an agent token, a session becomes a candidate, is elected and stops, with no operator token', async () => {
  const token = 'mcp-agent-token-000000001';
  const tokens = path.join(fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || os.tmpdir(), 'mcp-tokens-')),
    'tokens.json');
  fs.writeFileSync(tokens, JSON.stringify({ tokens: [
    { token, principal: 'mcp-agent', kind: 'agent', projects: [PROJECT] }] }));
  const secured = await Hubd.start({ dbPath: freshDbPath('mcp-tokens'), args: [`--token_file=${tokens}`] });
  const a = await startMcp({ hub: secured.address, agentId: 'mcp-token-a', env: { HUB_TOKEN: token } });
  try {
    await attached(a);
    const cand = await a.call('hub_role_candidacy', { role: 'cto', candidate: true, priority: 5 });
    assert.equal(cand.isError, undefined, JSON.stringify(cand));
    const ensure = await a.call('hub_role_ensure', { role: 'cto', cause: 'test' });
    assert.equal(ensure.isError, undefined, JSON.stringify(ensure));
    await waitFor('A holds cto', async () =>
      (await a.call('hub_whoami')).structuredContent.roles.find((r) => r.role === 'cto'));
    const stop = await a.call('hub_role_candidacy', { role: 'cto', candidate: false });
    assert.equal(stop.structuredContent.removed, true, JSON.stringify(stop));
    assert.deepEqual((await a.call('hub_role_candidates', { role: 'cto' })).structuredContent.candidates, []);
  } finally {
    await a.close();
    await secured.stop();
  }
});

test('a holder that steps down hands the role to the next candidate at once', async () => {
  const project = 'prj_STEPtestSTEPtestSTEPte';
  const a = await mcp('mcp-step-a', { project });
  const b = await mcp('mcp-step-b', { project });
  await attached(a);
  await attached(b);
  await a.call('hub_role_candidacy', { role: 'cto', candidate: true, priority: 10 });
  await b.call('hub_role_candidacy', { role: 'cto', candidate: true, priority: 1 });
  await a.call('hub_role_ensure', { role: 'cto' });
  const heldByA = await waitFor('A holds cto', async () =>
    (await a.call('hub_whoami')).structuredContent.roles.find((r) => r.role === 'cto'));
  const step = await a.call('hub_role_step_down', { role: 'cto' });
  assert.equal(step.isError, undefined, JSON.stringify(step));
  assert.equal(step.structuredContent.released_epoch, heldByA.epoch);
  assert.equal(step.structuredContent.next.holder_agent_id, 'mcp-step-b');
  const heldByB = await waitFor('B holds cto', async () =>
    (await b.call('hub_whoami')).structuredContent.roles.find((r) => r.role === 'cto'));
  assert.ok(heldByB.epoch > heldByA.epoch);
  await waitFor('A no longer holds it', async () =>
    (await a.call('hub_whoami')).structuredContent.roles.length === 0);
  // The old epoch is stale: stepping down from it again is hub's STALE_EPOCH.
  assert.match(errorText(await a.call('hub_role_step_down', { role: 'cto', epoch: heldByA.epoch })),
    /^STALE_EPOCH/);
  assert.match(errorText(await a.call('hub_role_step_down', { role: 'cto' })), /^ROLE_NOT_HELD/);
});

test('stdin closed: the agent is deregistered at once and its role moves on', async () => {
  const project = 'prj_BYEtestBYEtestBYEtestX';
  // A generous goodbye: a busy machine must not turn this into a crash.
  const a = await mcp('mcp-bye-a', { project, args: ['--goodbye-timeout=30'] });
  await attached(a);
  await a.call('hub_role_candidacy', { role: 'cto', candidate: true });
  await a.call('hub_role_ensure', { role: 'cto' });
  await waitFor('A holds cto', async () => (await a.call('hub_whoami')).structuredContent.roles.length === 1);
  const gone = exited(a);
  await a.close();  // closes the server's stdin
  await gone;
  const { agent } = await hub.presence.getAgent({ agentId: 'mcp-bye-a' });
  assert.equal(agent.status, 'AGENT_STATUS_OFFLINE');
  // The role moves on as the deregistration's consequence, committed just
  // after the goodbye is answered: waited for, not read once.
  await waitFor('the role is no longer active', async () => {
    const { role } = await hub.roles.getRole({ roleKey: { projectId: project, kind: 'ROLE_KIND_CTO' } });
    return role.state !== 'ROLE_STATE_ACTIVE';
  });
});

test('a goodbye timeout outside 1 .. 60 seconds is refused before anything starts', () => {
  for (const bad of ['0', '61', 'soon']) {
    const r = spawnSync(BIN, ['serve', `--hub=${hubd.address}`, `--goodbye-timeout=${bad}`],
      { encoding: 'utf8', input: '' });
    assert.equal(r.status, 64, bad);
    assert.match(r.stderr, /--goodbye-timeout must be 1 \.\. 60 seconds/, bad);
  }
});

test('a restarted session with the same derived identity supersedes the first', async () => {
  const env = { TMUX: '/tmp/tmux-0/default,1,0', TMUX_PANE: '%7', HUB_TMUX_SESSION: 'work' };
  const first = await mcp(undefined, { env });
  const one = await attached(first);
  assert.match(one.agent_id, /^claude:[A-Za-z0-9_-]{22}$/);
  assert.equal(one.agent_id_source, 'tmux pane');
  assert.deepEqual(one.tmux, { session: 'work', server: 'default', pane: '%7' });
  const second = await mcp(undefined, { env });
  const two = await attached(second);
  assert.equal(two.agent_id, one.agent_id);
  assert.ok(two.presence_generation > one.presence_generation);
  await waitFor('the first is superseded', async () => (await first.call('hub_whoami')).structuredContent.state === 'lost');
  const { agent } = await hub.presence.getAgent({ agentId: one.agent_id });
  assert.equal(agent.presenceGeneration, two.presence_generation);
  assert.equal(agent.transportLocators[0].kind, 'TRANSPORT_KIND_TMUX');
  assert.deepEqual(agent.transportLocators[0].tmux, { sessionName: 'work', muxServerId: 'default' });
});

test('a hub that is down: tools answer "hub unavailable at ADDR" and the server keeps going', async () => {
  const down = await startMcp({ hub: '127.0.0.1:1', agentId: 'mcp-down' });
  open.push(down);
  const r = await down.call('hub_list_agents', {});
  assert.match(errorText(r), /^HUB_UNAVAILABLE: hub unavailable at 127\.0\.0\.1:1/);
  const me = await down.call('hub_whoami');
  assert.equal(me.structuredContent.attached, false);
  assert.match(errorText(await down.call('hub_ack', { message_ids: ['x'] })), /^NOT_REGISTERED: /);
});

test('SIGTERM and SIGINT also say goodbye (Deregister) before exiting', async () => {
  for (const signal of ['SIGTERM', 'SIGINT']) {
    const id = `mcp-${signal.toLowerCase()}`;
    const a = await mcp(id, { args: ['--goodbye-timeout=30'] });
    await attached(a);
    const gone = exited(a);
    process.kill(a.pid, signal);
    await gone;
    const { agent } = await hub.presence.getAgent({ agentId: id });
    assert.equal(agent.status, 'AGENT_STATUS_OFFLINE', signal);
  }
});

test('reservations: A reserves, B meets the conflict and sees it in a check, A releases; ' +
  'a session that ends leaves nothing reserved', async () => {
  const a = await mcp('mcp-resv-a');
  const b = await mcp('mcp-resv-b');
  await attached(a);
  await attached(b);
  const got = await a.call('hub_reserve', { patterns: ['src/net/', 'docs/*.md'], reason: 'refactor' });
  assert.equal(got.isError, undefined, JSON.stringify(got));
  const mine = got.structuredContent;
  assert.deepEqual(mine.patterns, ['src/net', 'docs/*.md']);
  assert.equal(mine.mode, 'exclusive');
  assert.ok(mine.token >= 1);

  assert.match(errorText(await b.call('hub_reserve', { patterns: ['src/**/*.cc'], shared: true })),
    /^RESERVATION_CONFLICT: .*mcp-resv-a/);
  const check = await b.call('hub_check_paths', { paths: ['src/net/tcp.cc', 'README.md'] });
  assert.deepEqual(check.structuredContent.conflicts.map((c) => [c.pattern, c.holder_agent_id]),
    [['src/net/tcp.cc', 'mcp-resv-a']]);
  assert.match(errorText(await a.call('hub_reserve', { patterns: ['/etc/passwd'] })),
    /^RESERVATION_PATH_ABSOLUTE: /);

  const listed = await a.call('hub_reservations', {});
  assert.deepEqual(listed.structuredContent.reservations.map((r) => r.reservation_id), [mine.reservation_id]);
  const part = await a.call('hub_release', { reservation_id: mine.reservation_id, patterns: ['docs/*.md'] });
  assert.deepEqual(part.structuredContent.reservation.patterns, ['src/net']);
  const all = await a.call('hub_release', { reservation_id: mine.reservation_id });
  assert.equal(all.structuredContent.ended, true);
  const bs = await b.call('hub_reserve', { patterns: ['src/net/tcp.cc'] });
  assert.equal(bs.isError, undefined, JSON.stringify(bs));

  // B's session ends (stdin closed: deregistered): its reservation ends with it.
  await b.close();
  await waitFor('B\'s reservation ended', async () =>
    (await a.call('hub_check_paths', { paths: ['src/net/tcp.cc'] })).structuredContent.conflicts.length === 0);
  const again = await a.call('hub_reserve', { patterns: ['src/net'] });
  assert.equal(again.isError, undefined, JSON.stringify(again));
});

test('reservations: the hub\'s pattern limit counts distinct patterns, not the strings sent', async () => {
  const a = await mcp('mcp-resv-limit');
  await attached(a);
  const distinct = Array.from({ length: 64 }, (_, i) => `lim/f${i}.cc`);
  const got = await a.call('hub_reserve', { patterns: [...distinct, './lim/f0.cc'] });
  assert.equal(got.isError, undefined, JSON.stringify(got));
  assert.equal(got.structuredContent.patterns.length, 64);
  assert.match(errorText(await a.call('hub_reserve', { patterns: [...distinct, 'lim/f64.cc'] })),
    /^RESERVATION_TOO_MANY_PATTERNS: /);
});

test('jobs: a supervisor assigns, a worker claims, reports progress and completes; the supervisor ' +
  'sees the result', async () => {
  const { sessions: [sup, worker] } = await attachedSessions(['mcp-job-sup', 'mcp-job-worker']);
  assert.deepEqual((await worker.call('hub_claim_job', {})).structuredContent, { claimed: false, job: null });

  const assigned = await sup.call('hub_assign', { agent_id: 'mcp-job-worker', task: 'run the unit tests',
    payload: { target: '//...' }, priority: 7, timeout_seconds: 300, max_attempts: 2 });
  assert.equal(assigned.isError, undefined, JSON.stringify(assigned));
  const job = assigned.structuredContent;
  assert.deepEqual([job.state, job.created, job.priority, job.timeout_seconds, job.max_attempts, job.task],
    ['queued', true, 7, 300, 2, 'run the unit tests']);
  assert.deepEqual(job.supervisor, { agent_id: 'mcp-job-sup' });
  assert.deepEqual(job.worker, { agent_id: 'mcp-job-worker' });
  assert.match(assigned.content[0].text, new RegExp(`^assigned job ${job.job_id} to mcp-job-worker`));

  const claim = await worker.call('hub_claim_job', {});
  assert.equal(claim.isError, undefined, JSON.stringify(claim));
  const me = (await worker.call('hub_whoami')).structuredContent;
  assert.equal(claim.structuredContent.job.job_id, job.job_id);
  assert.equal(claim.structuredContent.job.state, 'running');
  assert.deepEqual(claim.structuredContent.job.payload, { target: '//...' });
  assert.deepEqual(claim.structuredContent.attempt, { attempt: 1, agent_id: 'mcp-job-worker',
    presence_generation: me.presence_generation, role_epoch: null });
  assert.match(claim.content[0].text, /task: run the unit tests\npayload: \{"target":"\/\/\.\.\."\}$/);
  // Nothing else waits for the worker.
  assert.equal((await worker.call('hub_claim_job', {})).structuredContent.claimed, false);

  // Only the job id: hub-mcp names the attempt it claimed.
  const progress = await worker.call('hub_job_progress', { job_id: job.job_id, note: 'half way',
    progress: { passed: 120, total: 300 } });
  assert.equal(progress.isError, undefined, JSON.stringify(progress));
  assert.equal(progress.structuredContent.cancel_requested, false);
  assert.ok(Date.parse(progress.structuredContent.deadline) > Date.now());
  let status = await sup.call('hub_job_status', { job_id: job.job_id });
  assert.equal(status.structuredContent.state, 'running');
  assert.equal(status.structuredContent.attempt.agent_id, 'mcp-job-worker');
  assert.deepEqual(status.structuredContent.progress, { passed: 120, total: 300, note: 'half way' });

  const done = await worker.call('hub_complete_job', { job_id: job.job_id, summary: 'all green',
    result: { passed: 300 } });
  assert.equal(done.isError, undefined, JSON.stringify(done));
  assert.equal(done.structuredContent.state, 'succeeded');

  status = await sup.call('hub_job_status', { job_id: job.job_id });
  assert.equal(status.structuredContent.state, 'succeeded');
  assert.deepEqual(status.structuredContent.result, { passed: 300, summary: 'all green' });
  assert.match(status.content[0].text, new RegExp(`^${job.job_id} succeeded \\(attempt 1 of 2 by mcp-job-worker, ` +
    'priority 7, for mcp-job-worker\\): run the unit tests; result: \\{.*"summary":"all green"'));
  const mine = await sup.call('hub_list_jobs', {});
  assert.deepEqual(mine.structuredContent.jobs.map((j) => [j.job_id, j.state]), [[job.job_id, 'succeeded']]);
  const asWorker = await worker.call('hub_list_jobs', { side: 'worker', states: ['succeeded'] });
  assert.deepEqual(asWorker.structuredContent.jobs.map((j) => j.job_id), [job.job_id]);
  assert.deepEqual((await worker.call('hub_list_jobs', {})).structuredContent.jobs, []);
  // The job ended: a second report is refused with hub's reason.
  assert.match(errorText(await worker.call('hub_job_progress', { job_id: job.job_id })), /^JOB_NOT_RUNNING: /);
});

test('jobs: a worker whose attempt was superseded is refused with ASSIGN_ATTEMPT_MISMATCH; its ' +
  'result is kept as a late result', async () => {
  const { sessions: [sup, first], whoami: [, one] } = await attachedSessions(['mcp-job-sup2', 'mcp-job-w2']);
  const { job_id: jobId } = (await sup.call('hub_assign', { agent_id: 'mcp-job-w2', task: 'refactor the parser',
    max_attempts: 3 })).structuredContent;
  assert.equal((await first.call('hub_claim_job', { job_id: jobId })).structuredContent.attempt.attempt, 1);

  // A second session of the same agent id registers: the first one's
  // presence is gone, and so is its attempt; the job waits for attempt 2.
  const second = await mcp('mcp-job-w2');
  const two = await attached(second);
  assert.ok(two.presence_generation > one.presence_generation);
  await waitFor('attempt 2 queued', async () => {
    const j = (await sup.call('hub_job_status', { job_id: jobId })).structuredContent;
    return j.state === 'queued' && j.attempt.attempt === 2 && j.error && j.error.reason === 'worker_gone';
  });
  const claim = await second.call('hub_claim_job', {});
  assert.equal(claim.structuredContent.job.job_id, jobId, JSON.stringify(claim));
  assert.equal(claim.structuredContent.attempt.attempt, 2);

  const stale = await first.call('hub_complete_job', { job_id: jobId, summary: 'done by the old session' });
  const text = errorText(stale);
  assert.match(text, /^ASSIGN_ATTEMPT_MISMATCH: /);
  assert.match(text, /this session wrote as attempt 1 .*the job is at attempt 2, running/);
  assert.match(text, /What to do: this session's attempt at the job is over/);
  assert.equal(stale.structuredContent.error.reason, 'ASSIGN_ATTEMPT_MISMATCH');
  assert.equal(stale.structuredContent.error.code, 'FAILED_PRECONDITION');
  // An explicit attempt of the current number is still not the old session's.
  assert.match(errorText(await first.call('hub_job_progress', { job_id: jobId, attempt: 2 })),
    /^ASSIGN_WORKER_MISMATCH: /);

  const status = (await sup.call('hub_job_status', { job_id: jobId })).structuredContent;
  assert.deepEqual([status.state, status.attempt.attempt, status.attempt.presence_generation],
    ['running', 2, two.presence_generation]);
  assert.deepEqual(status.late_results.map((l) => [l.attempt, l.agent_id, l.result]),
    [[1, 'mcp-job-w2', { summary: 'done by the old session' }]]);
  // The current session's own attempt goes through.
  const done = await second.call('hub_complete_job', { job_id: jobId, result: { ok: true } });
  assert.equal(done.structuredContent.state, 'succeeded', JSON.stringify(done));
});

test('jobs: a role or pool worker, cancel told through progress, fail and retry', async () => {
  const project = 'prj_JOBStestJOBStestJOBSte';
  const { sessions: [sup, worker] } = await attachedSessions(['mcp-job-sup3', 'mcp-job-w3'], { project });

  // A pool of every hub-mcp session ("mcp"): the worker claims it, the
  // supervisor cancels it, the worker hears it at its next report.
  const pool = (await sup.call('hub_assign', { pool_capabilities: ['mcp'], task: 'triage the flaky test' }))
    .structuredContent;
  assert.deepEqual(pool.worker, { pool: { capabilities: ['mcp'], topic: null } });
  assert.equal((await worker.call('hub_claim_job', {})).structuredContent.job.job_id, pool.job_id);
  const cancel = await sup.call('hub_cancel_job', { job_id: pool.job_id, reason: 'not needed any more' });
  assert.equal(cancel.structuredContent.cancel_requested, true, JSON.stringify(cancel));
  assert.match(cancel.content[0].text, /cancellation requested/);
  const told = await worker.call('hub_job_progress', { job_id: pool.job_id, note: 'looking' });
  assert.equal(told.structuredContent.cancel_requested, true);
  assert.match(told.content[0].text, /CANCELLED by its supervisor: stop working on it/);
  const ended = await worker.call('hub_fail_job', { job_id: pool.job_id, reason: 'cancelled' });
  assert.equal(ended.structuredContent.state, 'cancelled', JSON.stringify(ended));

  // A job for the cto role, held by the worker.
  await worker.call('hub_role_candidacy', { role: 'cto', candidate: true });
  await worker.call('hub_role_ensure', { role: 'cto' });
  const held = await waitFor('the worker holds cto', async () =>
    (await worker.call('hub_whoami')).structuredContent.roles.find((r) => r.role === 'cto'));
  const forRole = (await sup.call('hub_assign', { role: 'cto', task: 'decide the release date' })).structuredContent;
  assert.equal(forRole.worker.role, `cto of ${project}`);
  const claim = await worker.call('hub_claim_job', { job_id: forRole.job_id });
  assert.equal(claim.structuredContent.attempt.role_epoch, held.epoch, JSON.stringify(claim));
  const failed = await worker.call('hub_fail_job', { job_id: forRole.job_id, reason: 'no_access',
    message: 'the calendar is private' });
  assert.equal(failed.structuredContent.state, 'failed', JSON.stringify(failed));
  assert.deepEqual([failed.structuredContent.error.reason, failed.structuredContent.error.message],
    ['no_access', 'the calendar is private']);
  assert.match(errorText(await sup.call('hub_retry_job', { job_id: pool.job_id + 'x' })), /^ASSIGN_NOT_FOUND: /);
  const retried = await sup.call('hub_retry_job', { job_id: forRole.job_id });
  assert.deepEqual([retried.structuredContent.state, retried.structuredContent.attempt.attempt], ['queued', 2]);
  assert.match(errorText(await sup.call('hub_retry_job', { job_id: forRole.job_id })), /^JOB_NOT_ENDED: /);
  const cancelled = await sup.call('hub_cancel_job', { job_id: forRole.job_id });
  assert.equal(cancelled.structuredContent.state, 'cancelled');

  // Arguments are checked before any call, with hub's job reasons.
  for (const [tool, args, want] of [
    ['hub_assign', { task: 'x' }, /^JOB_WORKER_INVALID: /],
    ['hub_assign', { task: 'x', agent_id: 'mcp-job-w3', role: 'cto' }, /^JOB_WORKER_INVALID: /],
    ['hub_assign', { task: '', agent_id: 'mcp-job-w3' }, /^JOB_FIELD_INVALID: task/],
    ['hub_assign', { task: 'x', agent_id: 'mcp-job-w3', priority: 10 }, /^JOB_FIELD_INVALID: priority/],
    ['hub_assign', { task: 'x', agent_id: 'mcp-job-w3', max_attempts: 101 }, /^JOB_FIELD_INVALID: max_attempts/],
    ['hub_assign', { task: 'x', agent_id: 'mcp-job-w3', timeout_seconds: 86401 }, /^JOB_FIELD_INVALID: timeout/],
    ['hub_fail_job', { job_id: pool.job_id, reason: 'has space' }, /^JOB_FIELD_INVALID: reason/],
    ['hub_job_status', { job_id: '' }, /^JOB_ID_INVALID: /],
    ['hub_job_status', { job_id: 'no-such-job' }, /^ASSIGN_NOT_FOUND: /],
    ['hub_claim_job', { job_id: pool.job_id }, /^JOB_NOT_CLAIMABLE: /],
  ]) {
    assert.match(errorText(await sup.call(tool, args)), want, `${tool} ${JSON.stringify(args)}`);
  }
});
