'use strict';
// HubClient and PresenceSession against the real hubd ($HUBD).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const {
  HubClient, PresenceSession, HubError, status, toStruct, fromStruct, toDate, duration, durationMs,
} = require('../lib');
const { Hubd, freshDbPath, once } = require('./hubd');

const PROJECT = 'prj_NODECLIENTAAAAAAAAAAAA';
const CTO = { projectId: PROJECT, kind: 'ROLE_KIND_CTO' };

let hubd;
let client;

before(async () => {
  hubd = await Hubd.start({ dbPath: freshDbPath('client') });
  client = new HubClient(hubd.address);
});

after(async () => {
  client.close();
  await hubd.stop();
});

function session(agentId, extra = {}) {
  return new PresenceSession(client, {
    agentId,
    cli: 'AGENT_CLI_CLAUDE',
    heartbeatTtlMs: 10000,
    backoffInitialMs: 100,
    backoffMaxMs: 1000,
    ...extra,
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('a session registers, attaches and renews its lease with heartbeat frames', async () => {
  const s = session('node-presence-1', { heartbeatIntervalMs: 300 });
  const registered = once(s, 'registered');
  const attached = once(s, 'attached');
  await s.start();
  const [reg] = await registered;
  const [att] = await attached;
  assert.equal(reg.presenceGeneration, 1);
  assert.equal(att.presenceGeneration, 1);
  assert.equal(att.hubInstanceId, hubd.instanceId);
  assert.equal(s.state, 'attached');
  assert.equal(s.hubInstanceId, hubd.instanceId);

  const [ack] = await once(s, 'heartbeat');
  assert.equal(ack.status, 'AGENT_STATUS_ONLINE');
  assert.equal(ack.presenceGeneration, 1);
  assert.ok(toDate(ack.leaseExpiresAt) > toDate(ack.serverTime));

  const { agent } = await client.presence.getAgent({ agentId: 'node-presence-1' });
  assert.equal(agent.status, 'AGENT_STATUS_ONLINE');
  assert.equal(agent.streamAttached, true);
  assert.equal(agent.pid, process.pid);
  await s.stop();
  assert.equal(s.state, 'stopped');
});

test('a message published to the agent arrives as an event and its ack is recorded', async () => {
  const s = session('node-inbox-1');
  await s.start();
  const received = once(s, 'message');
  const published = await client.messages.publish({
    fromAgentId: 'node-sender-1',
    to: 'node-inbox-1',
    payload: toStruct({ text: 'hello', n: 3, nested: { ok: true } }),
  });
  const [delivery, ack] = await received;
  assert.equal(delivery.message.messageId, published.messageId);
  assert.equal(delivery.recipientAgentId, 'node-inbox-1');
  assert.deepEqual(fromStruct(delivery.message.payload), { text: 'hello', n: 3, nested: { ok: true } });

  const result = await ack();
  assert.deepEqual(result.ackedMessageIds, [published.messageId]);
  const pending = await client.messages.listPending({ agentId: 'node-inbox-1', peek: true });
  assert.deepEqual(pending.deliveries.map((d) => d.message.messageId), []);
  await s.stop({ deregister: true });
  const { agent } = await client.presence.getAgent({ agentId: 'node-inbox-1' });
  assert.equal(agent.status, 'AGENT_STATUS_OFFLINE');
});

test('a rejected frame fails with its reason and leaves the stream attached', async () => {
  const s = session('node-frames-1');
  await s.start();
  await assert.rejects(s.ackMessages(['']), (e) => {
    assert.ok(e instanceof HubError);
    assert.equal(e.code, status.INVALID_ARGUMENT);
    assert.equal(e.reason, 'MESSAGE_ID_INVALID');
    return true;
  });
  assert.equal(s.state, 'attached');
  const lease = await s.heartbeat();
  assert.equal(lease.presenceGeneration, s.presenceGeneration);
  await s.stop();
});

test('a second registration of the same agent id makes the first session lose authority', async () => {
  const first = session('node-owner-1');
  await first.start();
  const lost = once(first, 'authorityLost');
  const stopped = once(first, 'stopped');
  const second = session('node-owner-1');
  await second.start();
  const [info] = await lost;
  await stopped;
  assert.equal(info.reason, 'STALE_PRESENCE_OWNER');
  assert.equal(info.error.code, status.FAILED_PRECONDITION);
  assert.equal(info.currentPresenceGeneration, second.presenceGeneration);
  assert.equal(first.state, 'lost');
  assert.equal(second.presenceGeneration, first.presenceGeneration + 1);

  // The superseded session does not fight back: the second keeps the agent.
  await sleep(1500);
  const { agent } = await client.presence.getAgent({ agentId: 'node-owner-1' });
  assert.equal(agent.presenceGeneration, second.presenceGeneration);
  assert.equal(agent.streamAttached, true);
  assert.equal(second.state, 'attached');
  await assert.rejects(first.start(), (e) => e.reason === 'STALE_PRESENCE_OWNER');
  await second.stop();
});

test('failed calls carry the gRPC code and the hub reason code from ErrorInfo', async () => {
  await assert.rejects(
    client.presence.registerAgent({ agentId: 'x', cli: 'AGENT_CLI_CLAUDE' }),
    (e) => {
      assert.ok(e instanceof HubError);
      assert.equal(e.code, status.INVALID_ARGUMENT);
      assert.equal(e.codeName, 'INVALID_ARGUMENT');
      assert.equal(e.reason, 'AGENT_ID_INVALID');
      assert.equal(e.domain, 'hub.v1');
      return true;
    });
  await assert.rejects(client.presence.heartbeat({ agentId: 'node-nobody' }),
    (e) => e.code === status.NOT_FOUND && e.reason === 'AGENT_NOT_FOUND');
  const reg = await client.presence.registerAgent({ agentId: 'node-fenced-1', cli: 'AGENT_CLI_OTHER' });
  await assert.rejects(
    client.presence.heartbeat({
      agentId: 'node-fenced-1',
      hubInstanceId: '00000000-0000-7000-8000-000000000000',
    }),
    (e) => {
      assert.equal(e.code, status.FAILED_PRECONDITION);
      assert.equal(e.reason, 'STALE_HUB_INSTANCE');
      assert.equal(e.metadata.hub_instance_id, reg.hubInstanceId);
      return true;
    });
});

test('a session whose registration is invalid fails at once instead of retrying', async () => {
  const s = new PresenceSession(client, { agentId: 'no', cli: 'AGENT_CLI_CLAUDE' });
  const failed = once(s, 'failed');
  await assert.rejects(s.start(), (e) => e.reason === 'AGENT_ID_INVALID');
  const [error] = await failed;
  assert.equal(error.code, status.INVALID_ARGUMENT);
  assert.equal(s.state, 'failed');
});

test('a role activation is acknowledged on the stream and its epoch becomes the fencing token', async () => {
  const s = session('node-cto-1', { projectId: PROJECT, capabilities: ['role:cto:candidate'] });
  await s.start();
  assert.equal(s.roleEpoch(), undefined);
  await client.roles.upsertRoleCandidate({ roleKey: CTO, agentId: 'node-cto-1' });
  const activated = once(s, 'roleActivated');
  const { receipt } = await client.roles.ensureRole({
    roleKey: CTO, trigger: 'ENSURE_ROLE_TRIGGER_MANUAL', causeId: 'node-client-test',
  });
  assert.equal(receipt.holderAgentId, 'node-cto-1');
  const [{ activation, epoch }] = await activated;
  assert.equal(activation.holderAgentId, 'node-cto-1');
  assert.equal(epoch, receipt.epoch);
  assert.equal(s.roleEpoch(activation.roleKeyWire), receipt.epoch);
  assert.equal(s.roleEpoch(), receipt.epoch);

  const { role } = await client.roles.getRole({ roleKey: CTO });
  assert.equal(role.state, 'ROLE_STATE_ACTIVE');
  assert.equal(role.holderAgentId, 'node-cto-1');
  assert.equal(role.epoch, s.roleEpoch());
  await s.stop();
});

// A hub that is reachable but refuses every registration with UNAVAILABLE
// (as a hub would under a retryable failure); resolves with {address, close}.
function refusingHub() {
  const grpc = require('@grpc/grpc-js');
  const { loadProtos } = require('../lib/protos');
  const { packageDefinition } = loadProtos();
  const v1 = grpc.loadPackageDefinition(packageDefinition).hub.v1;
  const server = new grpc.Server();
  server.addService(v1.PresenceService.service, {
    RegisterAgent: (call, callback) =>
      callback({ code: status.UNAVAILABLE, details: 'refusing for the test' }),
  });
  return new Promise((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
      if (err) return reject(err);
      resolve({ address: `127.0.0.1:${port}`, close: () => server.forceShutdown() });
    });
  });
}

test('while a reachable hub refuses, the session retries with exponential backoff, capped and jittered', async () => {
  const hub = await refusingHub();
  const refusing = new HubClient(hub.address);
  const jitters = [0.5, 1, 0, 0.5, 0.5, 0.5];  // Math.random values: 0, +20 %, -20 %, 0, ...
  const s = new PresenceSession(refusing, {
    agentId: 'node-backoff-1', cli: 'AGENT_CLI_GEMINI',
    backoffInitialMs: 20, backoffMaxMs: 200, backoffMultiplier: 2, backoffJitter: 0.2,
    random: () => jitters.shift() ?? 0.5,
  });
  const delays = [];
  const sixth = new Promise((resolve) => s.on('disconnected', ({ error, retryInMs }) => {
    assert.equal(error.code, status.UNAVAILABLE);
    delays.push(retryInMs);
    if (delays.length === 6) resolve();
  }));
  const started = s.start();
  await sixth;
  assert.deepEqual(delays, [20, 48, 64, 160, 200, 200]);
  assert.equal(s.state, 'backoff');
  await s.stop();
  await assert.rejects(started, (e) => e.code === status.CANCELLED);
  refusing.close();
  hub.close();
});

test('while no hub answers the session waits for the channel to connect instead of backing off', async () => {
  // A port nothing listens on: the connection is refused.
  const down = new HubClient('127.0.0.1:1');
  const s = new PresenceSession(down, {
    agentId: 'node-backoff-2', cli: 'AGENT_CLI_GEMINI', backoffInitialMs: 20,
  });
  const [{ error, retryInMs, waitingForHub }] = await (async () => {
    const disconnected = once(s, 'disconnected');
    s.start().catch(() => {});
    return disconnected;
  })();
  assert.equal(error.code, status.UNAVAILABLE);
  assert.equal(waitingForHub, true);
  assert.equal(retryInMs, 0);
  assert.equal(s.state, 'backoff');
  // stop() ends the wait at once.
  const stopping = Date.now();
  await s.stop();
  assert.ok(Date.now() - stopping < 2000);
  assert.equal(s.state, 'stopped');
  down.close();
});

test('jobs: create, claim, heartbeat, complete, get and list, each through client.jobs', async () => {
  const worker = session('node-job-worker-1', { projectId: PROJECT });
  await worker.start();
  const none = await client.jobs.claimJob({ agentId: 'node-job-worker-1' });
  assert.equal(none.job, null);

  const { job, created } = await client.jobs.createJob({
    projectId: PROJECT, supervisor: { agentId: 'node-job-sup-1' }, worker: { agentId: 'node-job-worker-1' },
    task: 'run the unit tests', payload: toStruct({ target: '//...' }), priority: 7,
    timeout: duration(300000), maxAttempts: 3,
  });
  assert.equal(created, true);
  assert.equal(job.state, 'JOB_STATE_QUEUED');
  assert.deepEqual([job.priority, durationMs(job.timeout), job.maxAttempts, job.topic], [7, 300000, 3, 'assign.job']);

  const { job: claimed } = await client.jobs.claimJob({ agentId: 'node-job-worker-1',
    presenceGeneration: worker.presenceGeneration });
  assert.equal(claimed.jobId, job.jobId);
  assert.equal(claimed.state, 'JOB_STATE_RUNNING');
  assert.deepEqual(fromStruct(claimed.payload), { target: '//...' });
  assert.deepEqual(claimed.attempt, { jobId: job.jobId, attempt: 1, agentId: 'node-job-worker-1',
    presenceGeneration: worker.presenceGeneration, roleEpoch: 0 });

  const beat = await client.jobs.heartbeatJob({ attempt: claimed.attempt,
    progress: toStruct({ passed: 120, total: 300 }) });
  assert.equal(beat.cancelRequested, false);
  assert.ok(toDate(beat.deadline) > new Date());
  const { job: running } = await client.jobs.getJob({ jobId: job.jobId });
  assert.deepEqual(fromStruct(running.progress), { passed: 120, total: 300 });

  const { job: done } = await client.jobs.completeJob({ attempt: claimed.attempt,
    result: toStruct({ passed: 300 }) });
  assert.equal(done.state, 'JOB_STATE_SUCCEEDED');
  assert.deepEqual(fromStruct(done.result), { passed: 300 });
  const listed = await client.jobs.listJobs({ projectId: PROJECT, supervisorAgentId: 'node-job-sup-1',
    states: ['JOB_STATE_SUCCEEDED'] });
  assert.deepEqual(listed.jobs.map((j) => j.jobId), [job.jobId]);
  await worker.stop();
});

test('jobs: fail, retry and cancel; refusals are HubErrors with hub\'s job reasons', async () => {
  const worker = session('node-job-worker-2', { projectId: PROJECT });
  await worker.start();
  const create = (task) => client.jobs.createJob({ projectId: PROJECT, supervisor: { agentId: 'node-job-sup-2' },
    worker: { agentId: 'node-job-worker-2' }, task, maxAttempts: 2 });
  const { job } = await create('deploy');
  const { job: claimed } = await client.jobs.claimJob({ agentId: 'node-job-worker-2', jobId: job.jobId });

  // A retryable failure with an attempt left: queued again as attempt 2,
  // after a backoff.
  const { job: failed } = await client.jobs.failJob({ attempt: claimed.attempt,
    error: { reason: 'flaky', message: 'the runner died', retryable: true } });
  assert.deepEqual([failed.state, failed.attempt.attempt, failed.error.reason],
    ['JOB_STATE_QUEUED', 2, 'flaky']);
  assert.ok(toDate(failed.notBefore) > toDate(failed.updatedAt));
  // The ended attempt writes nothing any more.
  await assert.rejects(client.jobs.heartbeatJob({ attempt: claimed.attempt }), (e) => {
    assert.ok(e instanceof HubError);
    assert.equal(e.code, status.FAILED_PRECONDITION);
    assert.equal(e.reason, 'ASSIGN_ATTEMPT_MISMATCH');
    assert.deepEqual([e.metadata.job_id, e.metadata.attempt, e.metadata.state], [job.jobId, '2', 'queued']);
    return true;
  });
  await assert.rejects(client.jobs.retryJob({ jobId: job.jobId }),
    (e) => e.code === status.FAILED_PRECONDITION && e.reason === 'JOB_NOT_ENDED');
  const { job: cancelled } = await client.jobs.cancelJob({ jobId: job.jobId, reason: 'frozen' });
  assert.deepEqual([cancelled.state, cancelled.error.reason, cancelled.error.message],
    ['JOB_STATE_CANCELLED', 'cancelled', 'frozen']);
  const { job: again } = await client.jobs.retryJob({ jobId: job.jobId });
  assert.deepEqual([again.state, again.attempt.attempt], ['JOB_STATE_QUEUED', 3]);

  // A running job's cancellation reaches its worker through the heartbeat.
  const { job: second } = await create('migrate');
  const { job: running } = await client.jobs.claimJob({ agentId: 'node-job-worker-2', jobId: second.jobId });
  const { job: marked } = await client.jobs.cancelJob({ jobId: second.jobId });
  assert.deepEqual([marked.state, marked.cancelRequested], ['JOB_STATE_RUNNING', true]);
  assert.equal((await client.jobs.heartbeatJob({ attempt: running.attempt })).cancelRequested, true);
  const { job: stopped } = await client.jobs.failJob({ attempt: running.attempt,
    error: { reason: 'cancelled', retryable: true } });
  assert.equal(stopped.state, 'JOB_STATE_CANCELLED');

  await assert.rejects(client.jobs.getJob({ jobId: 'no-such-job' }),
    (e) => e.code === status.NOT_FOUND && e.reason === 'ASSIGN_NOT_FOUND' && e.metadata.job_id === 'no-such-job');
  await assert.rejects(client.jobs.createJob({ projectId: PROJECT, supervisor: { agentId: 'node-job-sup-2' },
    worker: { agentId: 'node-job-worker-2' }, task: 'x', priority: 10 }),
  (e) => e.code === status.INVALID_ARGUMENT && e.reason === 'JOB_FIELD_INVALID' && e.metadata.field === 'priority');
  await assert.rejects(client.jobs.createJob({ projectId: PROJECT, supervisor: { agentId: 'node-job-sup-2' },
    task: 'x' }), (e) => e.reason === 'JOB_WORKER_INVALID');
  await assert.rejects(client.jobs.claimJob({ agentId: 'node-job-worker-2', jobId: second.jobId }),
    (e) => e.code === status.FAILED_PRECONDITION && e.reason === 'JOB_NOT_CLAIMABLE');
  await worker.stop();
});
