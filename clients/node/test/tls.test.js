'use strict';
// HubClient and PresenceSession over mutual TLS with a bearer token, against
// the real hubd ($HUBD) started with --tls_cert/--tls_key/--tls_client_ca/
// --token_file and a throw-away PKI (tests/make_test_pki.sh, openssl).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { HubClient, PresenceSession, status } = require('../lib');
const { Hubd, freshDbPath, once } = require('./hubd');

const TOKEN = 'node-client-token-000001';
let hubd;
let pki;

before(async () => {
  const db = freshDbPath('tls');
  pki = path.join(path.dirname(db), 'pki');
  execFileSync('sh', ['tests/make_test_pki.sh', pki]);
  const tokens = path.join(pki, 'tokens.json');
  fs.writeFileSync(tokens, JSON.stringify({
    tokens: [{ token: TOKEN, principal: 'node-builder', kind: 'agent', projects: ['*'] }],
  }));
  hubd = await Hubd.start({
    dbPath: db,
    args: [`--tls_cert=${pki}/server.pem`, `--tls_key=${pki}/server.key`,
      `--tls_client_ca=${pki}/ca.pem`, `--token_file=${tokens}`],
  });
});

after(async () => {
  await hubd.stop();
});

function client(extra = {}) {
  return new HubClient(hubd.address, {
    tlsCa: `${pki}/ca.pem`,
    tlsCert: `${pki}/client.pem`,
    tlsKey: `${pki}/client.key`,
    tlsServerName: 'localhost',
    token: TOKEN,
    deadlineMs: 5000,
    ...extra,
  });
}

test('a session connects with mutual TLS and a bearer token', async () => {
  const c = client();
  try {
    const st = await c.hub.getStatus({});
    assert.equal(st.hubInstanceId, hubd.instanceId);
    const s = new PresenceSession(c, {
      agentId: 'node-tls-1', cli: 'AGENT_CLI_CLAUDE', heartbeatTtlMs: 10000,
    });
    const attached = once(s, 'attached');
    await s.start();
    const [att] = await attached;
    assert.equal(att.presenceGeneration, 1);
    await s.stop();
  } finally {
    c.close();
  }
});

test('without the token or with the wrong CA the hub refuses', async () => {
  const noToken = client({ token: '' });
  try {
    await assert.rejects(noToken.hub.getStatus({}), (e) => {
      assert.equal(e.code, status.UNAUTHENTICATED);
      assert.equal(e.reason, 'PRINCIPAL_REQUIRED');
      return true;
    });
  } finally {
    noToken.close();
  }
  const wrongCa = client({ tlsCa: `${pki}/other_ca.pem` });
  try {
    await assert.rejects(wrongCa.hub.getStatus({}), (e) => {
      assert.equal(e.code, status.UNAVAILABLE);
      return true;
    });
  } finally {
    wrongCa.close();
  }
});
