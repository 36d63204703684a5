'use strict';
// A PresenceSession survives hubd being killed (SIGKILL) and restarted on the
// same port and database, without help from the application.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const grpc = require('@grpc/grpc-js');
const { HubClient, PresenceSession, toStruct } = require('../lib');
const { Hubd, freshDbPath, once } = require('./hubd');

test('after hubd is killed and restarted on the same port and db the session recovers by itself', async () => {
  let hubd = await Hubd.start({ dbPath: freshDbPath('restart') });
  const client = new HubClient(hubd.address);
  const s = new PresenceSession(client, {
    agentId: 'node-restart-1',
    cli: 'AGENT_CLI_CODEX',
    heartbeatTtlMs: 10000,
    heartbeatIntervalMs: 300,
    backoffInitialMs: 100,
    backoffMaxMs: 1000,
  });
  const seen = [];
  s.on('message', (delivery) => seen.push(delivery.message.messageId));
  try {
    await s.start();
    const firstGeneration = s.presenceGeneration;
    const firstInstance = s.hubInstanceId;
    assert.equal(firstInstance, hubd.instanceId);

    // A message delivered but not acknowledged before the crash.
    const delivered = once(s, 'message');
    const unacked = await client.messages.publish({
      fromAgentId: 'node-sender-2', to: 'node-restart-1', payload: toStruct({ n: 1 }),
    });
    await delivered;

    const disconnected = once(s, 'disconnected');
    const restarted = once(s, 'hubRestarted', 60000);
    const reattached = once(s, 'attached', 60000);
    const exit = await hubd.stop('SIGKILL');
    assert.equal(exit.signal, 'SIGKILL');
    const [{ error }] = await disconnected;
    assert.equal(error.codeName, 'UNAVAILABLE');
    assert.equal(s.attached, false);

    hubd = await hubd.restart();
    assert.notEqual(hubd.instanceId, firstInstance);
    const [info] = await restarted;
    assert.equal(info.reason, 'STALE_HUB_INSTANCE');
    assert.equal(info.previousHubInstanceId, firstInstance);
    const [attached] = await reattached;
    assert.equal(attached.hubInstanceId, hubd.instanceId);
    assert.equal(s.hubInstanceId, hubd.instanceId);
    assert.equal(s.state, 'attached');
    assert.ok(s.presenceGeneration > firstGeneration);

    // The unacknowledged message comes again; a new one arrives too.
    const fresh = await client.messages.publish({
      fromAgentId: 'node-sender-2', to: 'node-restart-1', payload: toStruct({ n: 2 }),
    });
    // The redelivery (pushed from the store when the stream attaches) and
    // the fresh message (pushed by its publish) may arrive in either order.
    const redelivered = () => seen.filter((id) => id === unacked.messageId).length >= 2;
    const deadline = Date.now() + 20000;
    while (!(seen.includes(fresh.messageId) && redelivered()) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(seen.includes(fresh.messageId), 'the message published after the restart arrived');
    assert.ok(redelivered(), 'the unacknowledged message was delivered again');
    const result = await s.ackMessages([unacked.messageId, fresh.messageId]);
    assert.deepEqual([...result.ackedMessageIds].sort(),
      [unacked.messageId, fresh.messageId].sort());

    const [lease] = await once(s, 'heartbeat');
    assert.equal(lease.presenceGeneration, s.presenceGeneration);
    const { agent } = await client.presence.getAgent({ agentId: 'node-restart-1' });
    assert.equal(agent.status, 'AGENT_STATUS_ONLINE');
    assert.equal(agent.streamAttached, true);
    assert.equal(agent.presenceGeneration, s.presenceGeneration);
  } finally {
    await s.stop();
    client.close();
    await hubd.stop();
  }
});

// Resolves once `channel` reports `state`; rejects after timeoutMs.
function channelState(channel, state, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const check = () => {
      const now = channel.getConnectivityState(false);
      if (now === state) return resolve();
      if (Date.now() >= deadline) return reject(new Error(`channel not in state ${state}`));
      channel.watchConnectivityState(now, deadline, check);
    };
    check();
  });
}

test('with default options the session re-attaches within seconds of a killed hubd serving again', async () => {
  let hubd = await Hubd.start({ dbPath: freshDbPath('restart-fast') });
  // Everything at its defaults, as an agent would run it: the session's
  // backoff (up to 15 s) and the channel's.
  const client = new HubClient(hubd.address);
  const s = new PresenceSession(client, { agentId: 'node-restart-fast', cli: 'AGENT_CLI_CODEX' });
  try {
    await s.start();
    const firstInstance = s.hubInstanceId;
    const disconnected = once(s, 'disconnected');
    await hubd.stop('SIGKILL');
    await disconnected;
    // The hub stays down until the channel has failed to reconnect: the
    // session used to sleep a growing backoff from here on, and came back
    // seconds after the hub did.
    await channelState(client._channel, grpc.connectivityState.TRANSIENT_FAILURE, 30000);
    // Listening before the restart, so that an early attach is not missed;
    // the bound (generous for a busy machine) counts from "serving on".
    const reattached = once(s, 'attached', 60000);
    hubd = await hubd.restart();
    const serving = Date.now();
    const [attached] = await reattached;
    const tookMs = Date.now() - serving;
    assert.ok(tookMs < 10000, `re-attached ${tookMs} ms after the hub was serving`);
    assert.equal(attached.hubInstanceId, hubd.instanceId);
    assert.notEqual(attached.hubInstanceId, firstInstance);
  } finally {
    await s.stop();
    client.close();
    await hubd.stop();
  }
});
