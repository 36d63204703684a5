'use strict';
// The console's security in a real browser (Debian's chromium driven by
// puppeteer-core) against a real hubd with TLS and a token file: the login
// form, the session cookie, a token that sees only its projects and may not
// act, logout, a revoked token, the listen rule off loopback, a rotated
// certificate and the limit on failed logins.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync, spawnSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const tls = require('tls');
const { HubClient, PresenceSession, toStruct } = require('../../clients/node/lib');
const { freshDbPath } = require('../../clients/node/test/hubd');
const { until, startHubd, launch, Watcher, screenshot, cleanUp } = require('./browser');

const ALPHA = 'prj_CONSOLEAUTHALPHAAAAAAA';
const BETA = 'prj_CONSOLEAUTHBETAAAAAAAA';
const OPS = 'console-operator-token-00000001';
const VIEWER = 'console-viewer-token-000000001';

let hubd;
let base;
let pki;
let tokens;
let client;
let browser;
let page;
let watcher;
const sessions = [];

function writeTokens(entries) {
  fs.writeFileSync(tokens, JSON.stringify({ tokens: entries }));
}

const OPS_ENTRY = { token: OPS, principal: 'ops', kind: 'operator', projects: ['*'] };
const VIEWER_ENTRY = { token: VIEWER, principal: 'viewer', kind: 'agent', projects: [ALPHA] };

before(async () => {
  const dir = path.dirname(freshDbPath('console-auth-pki'));
  pki = path.join(dir, 'pki');
  execFileSync('sh', ['tests/make_test_pki.sh', pki]);
  tokens = path.join(pki, 'tokens.json');
  writeTokens([OPS_ENTRY, VIEWER_ENTRY]);
  ({ hubd, base } = await startHubd('console-auth', [
    `--tls_cert=${pki}/server.pem`, `--tls_key=${pki}/server.key`, `--token_file=${tokens}`,
  ], 'https'));
  client = new HubClient(hubd.address, {
    tlsCa: `${pki}/ca.pem`, tlsServerName: 'localhost', token: OPS,
  });
  for (const [agentId, projectId] of [['auth-alpha-1', ALPHA], ['auth-beta-1', BETA]]) {
    const s = new PresenceSession(client, {
      agentId, projectId, cli: 'AGENT_CLI_CODEX', heartbeatTtlMs: 30000,
      capabilities: ['role:cto:candidate'],
    });
    sessions.push(s);
    await s.start();
    await client.roles.upsertRoleCandidate({ roleKey: { projectId, kind: 'ROLE_KIND_CTO' }, agentId });
  }
  browser = await launch();
  page = await browser.newPage();
  watcher = new Watcher(page);
  await page.setViewport({ width: 1280, height: 800 });
  page.on('dialog', (d) => d.accept());
});

after(() => cleanUp({ sessions, browser, clients: [client], hubs: [hubd], watcher }));

async function logIn(token) {
  await page.goto(`${base}/`, { waitUntil: 'load' });
  await page.waitForSelector('#login-view:not([hidden])', { timeout: 15000 });
  await page.type('#token', token);
  await page.click('#login button[type=submit]');
}

// fetch from inside the page, with its cookie and CSRF token.
function pageFetch(p, body) {
  return page.evaluate(async (url, b) => {
    const session = await (await fetch('/api/session')).json();
    const r = await fetch(url, b === undefined ? {} : {
      method: 'POST', body: JSON.stringify(b),
      headers: { 'Content-Type': 'application/json', 'X-Console-CSRF': session.csrf },
    });
    return { status: r.status, body: await r.json() };
  }, p, body);
}

test('off loopback, the console listener needs TLS and a token file', () => {
  const r = spawnSync(process.env.HUBD, ['--listen=127.0.0.1:0', `--db=${freshDbPath('exposed')}`,
    '--metrics_listen=0.0.0.0:0'], { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /TLS|token/);
});

test('without a login the console shows only the login form and its API answers 401', async () => {
  const r = await page.goto(`${base}/`, { waitUntil: 'load' });
  assert.ok(r.url().startsWith('https://'));
  await page.waitForSelector('#login-view:not([hidden])');
  assert.equal(await page.$eval('#tabs', (e) => e.hidden), true);
  for (const p of ['/api/fleet', '/api/roles', '/api/events', '/api/stream?after=0']) {
    const status = await page.evaluate(async (u) => (await fetch(u)).status, p);
    assert.equal(status, 401, p);
  }
  await page.type('#token', 'not-a-token-of-this-hub');
  await page.click('#login button[type=submit]');
  await page.waitForFunction(() => /Login refused/.test(document.querySelector('#login-error').textContent));
  assert.equal(await page.$eval('#token', (e) => e.value), '', 'the token stays in the field');
});

test('a read-only token sees only its projects, may not act, and its session is an HttpOnly Secure SameSite=Strict cookie', async () => {
  const t = Date.now();
  await logIn(VIEWER);
  await watcher.shows('the viewer\'s fleet', t, () =>
    !!document.querySelector('tr[data-agent-id="auth-alpha-1"]'));
  assert.equal(await page.$('tr[data-agent-id="auth-beta-1"]'), null);
  assert.match(await page.$eval('#whoami', (e) => e.textContent), /^viewer \(agent; prj_CONSOLEAUTHALPHAAAAAAA\)$/);
  assert.ok(!page.url().includes(VIEWER), 'the token is not in the URL');
  const cookies = await page.cookies();
  const cookie = cookies.find((c) => c.name === 'hub_console');
  assert.ok(cookie, JSON.stringify(cookies));
  assert.equal(cookie.httpOnly, true);
  assert.equal(cookie.secure, true);
  assert.equal(cookie.sameSite, 'Strict');
  assert.ok(!cookie.value.includes(VIEWER));
  assert.equal(await page.evaluate(() => document.cookie), '');

  await page.click('#tabs button[data-view="roles"]');
  await page.waitForSelector('.role', { timeout: 15000 });
  const roles = await page.$$eval('.role', (cards) => cards.map((c) => c.dataset.project));
  assert.deepEqual(roles, [ALPHA]);
  assert.equal(await page.$('.role button.ensure'), null, 'no action for a read-only token');
  const { wire } = await client.hub.encodeRoleKey({ roleKey: { projectId: ALPHA, kind: 'ROLE_KIND_CTO' } });
  const refused = await pageFetch('/api/roles/ensure', { wire });
  assert.equal(refused.status, 403);
  assert.equal(refused.body.reason, 'PERMISSION_DENIED');
  const lead = await client.hub.encodeRoleKey({
    roleKey: { projectId: ALPHA, kind: 'ROLE_KIND_LEAD', scopeId: 'scp_CONSOLEAUTHLEADAAAAAAA' },
  });
  const notClosed = await pageFetch('/api/roles/close', { wire: lead.wire, reason: 'no' });
  assert.equal(notClosed.status, 403);
  assert.equal(notClosed.body.reason, 'PERMISSION_DENIED');
  const notRedriven = await pageFetch('/api/dead-letters/redrive', { id: 'any-message' });
  assert.equal(notRedriven.status, 403);
  assert.equal(notRedriven.body.reason, 'PERMISSION_DENIED');
  const notReleased = await pageFetch('/api/reservations/release', { id: 'any-reservation' });
  assert.equal(notReleased.status, 403);
  assert.equal(notReleased.body.reason, 'PERMISSION_DENIED');
  const fleet = await pageFetch('/api/fleet');
  assert.deepEqual(fleet.body.agents.map((a) => a.agent_id), ['auth-alpha-1']);
  // Live changes are scoped too: a new agent of the other project, then one
  // of the viewer's; the stream is in order, so once the second shows, the
  // first would have.
  await page.click('#tabs button[data-view="fleet"]');
  const hidden = new PresenceSession(client, { agentId: 'auth-beta-2', projectId: BETA, cli: 'AGENT_CLI_CODEX' });
  const shown = new PresenceSession(client, { agentId: 'auth-alpha-2', projectId: ALPHA, cli: 'AGENT_CLI_CODEX' });
  sessions.push(hidden, shown);
  await hidden.start();
  const t2 = Date.now();
  await shown.start();
  await watcher.shows('an agent of the viewer\'s project', t2, () =>
    !!document.querySelector('tr[data-agent-id="auth-alpha-2"]'));
  assert.equal(await page.$('tr[data-agent-id="auth-beta-2"]'), null);
  const events = await page.$$eval('#events li', (lis) => lis.map((li) => li.textContent));
  assert.ok(events.some((e) => e.includes('agent_id=auth-alpha-2')), events.join('\n'));
  assert.ok(!events.some((e) => e.includes('auth-beta')), events.join('\n'));

  // An event that names agents and no project (a dead letter: from, to) is
  // seen by the tokens of their projects, as ListDeadLetters' rule has it.
  const deadLetter = async (from, to, projectId) => {
    const away = new PresenceSession(client, { agentId: to, projectId, cli: 'AGENT_CLI_CODEX' });
    sessions.push(away);
    await away.start();
    await away.stop();
    const { messageId } = await client.messages.publish({
      fromAgentId: from, to, ttl: { seconds: 1 }, payload: toStruct({ n: 1 }),
    });
    await until(async () => (await client.messages.listDeadLetters({})).deadLetters
      .some((d) => d.messageId === messageId), `the dead letter of ${to}`);
    return messageId;
  };
  const betaLetter = await deadLetter('auth-beta-1', 'auth-beta-away', BETA);
  const t3 = Date.now();
  const alphaLetter = await deadLetter('auth-alpha-1', 'auth-alpha-away', ALPHA);
  await watcher.shows('the dead letter event of the viewer\'s agent', t3, (id) =>
    [...document.querySelectorAll('#events li[data-event="message_dead_lettered"]')]
      .some((li) => li.textContent.includes(`message_id=${id}`)), alphaLetter);
  const later = await page.$$eval('#events li', (lis) => lis.map((li) => li.textContent));
  assert.ok(!later.some((e) => e.includes(betaLetter)), later.join('\n'));
  // Jobs: the view and its changes hold the viewer's project's only; the
  // stream is in order, so once the second job shows, the first would have.
  await page.click('#tabs button[data-view="jobs"]');
  const job = (projectId, worker, task) => client.jobs.createJob({
    projectId, supervisor: { agentId: worker }, worker: { agentId: worker }, task,
  });
  const { job: betaJob } = await job(BETA, 'auth-beta-2', 'beta job');
  const tj = Date.now();
  const { job: alphaJob } = await job(ALPHA, 'auth-alpha-2', 'alpha job');
  await watcher.shows('a job of the viewer\'s project', tj, (id) =>
    !!document.querySelector(`#jobs-queue tr[data-job-id="${id}"]`), alphaJob.jobId);
  assert.equal(await page.$(`tr[data-job-id="${betaJob.jobId}"]`), null);
  const jobs = await pageFetch('/api/jobs');
  assert.deepEqual(jobs.body.jobs.map((j) => j.job_id), [alphaJob.jobId]);
  // A fencing refusal of a unary call names its agent: seen by its project.
  const t4 = Date.now();
  await assert.rejects(client.presence.deregister({ agentId: 'auth-alpha-1', presenceGeneration: 999 }),
    (e) => e.reason === 'STALE_PRESENCE_OWNER');
  await watcher.shows('the fencing refusal of the viewer\'s agent', t4, () =>
    [...document.querySelectorAll('#events li[data-event="fencing_rejected"]')]
      .some((li) => / agent_id=auth-alpha-1 /.test(li.textContent)));
});

test('logging out ends the session', async () => {
  await page.click('#logout');
  await page.waitForSelector('#login-view:not([hidden])');
  const status = await page.evaluate(async () => (await fetch('/api/fleet')).status);
  assert.equal(status, 401);
});

test('an operator sees every project and forces an election; removing its token from the file ends its session', async () => {
  const t = Date.now();
  await logIn(OPS);
  await watcher.shows('the operator\'s fleet', t, () =>
    !!document.querySelector('tr[data-agent-id="auth-alpha-1"]') &&
    !!document.querySelector('tr[data-agent-id="auth-beta-1"]'));
  await page.click('#tabs button[data-view="roles"]');
  const { wire } = await client.hub.encodeRoleKey({ roleKey: { projectId: BETA, kind: 'ROLE_KIND_CTO' } });
  // The roles arrive in the feed apart from the agents: wait for the card.
  await page.waitForSelector(`.role[data-wire="${wire}"] button.ensure`, { timeout: 15000 });
  const clicked = Date.now();
  await page.click(`.role[data-wire="${wire}"] button.ensure`);
  // Nobody asked for an election of this role before: the operator's
  // starts it, and the page shows the role become active.
  await watcher.shows('the operator\'s EnsureRole receipt', clicked, () =>
    /^EnsureRole prj_CONSOLEAUTHBETAAAAAAAA cto: started \(state elected-probing, holder auth-beta-1, epoch 1\)$/.test(
      document.querySelector('#action-result').textContent));
  await watcher.shows('the elected role', clicked, (w) => {
    const c = document.querySelector(`.role[data-wire="${w}"]`);
    return c.querySelector('.state').textContent === 'active' &&
      c.querySelector('.holder .v').textContent === 'auth-beta-1';
  }, wire);
  const { role } = await client.roles.getRole({ roleKey: { projectId: BETA, kind: 'ROLE_KIND_CTO' } });
  assert.equal(role.state, 'ROLE_STATE_ACTIVE');
  await screenshot(page, 'roles', 'roles-operator');

  writeTokens([VIEWER_ENTRY]);  // hubd re-reads the file when it changes
  const revoked = Date.now();
  await until(async () => (await page.evaluate(async () => (await fetch('/api/fleet')).status)) === 401,
    'the removed token to end the session');
  console.log(`# console: a removed token ended its session ${Date.now() - revoked} ms after the file changed`);
  await watcher.shows('the login form after the revocation', revoked,
    () => !document.querySelector('#login-view').hidden);
});

test('the console listener serves a rotated certificate to new connections, and the listener and open pages stay', async () => {
  const port = Number(new URL(base).port);
  const served = () => new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false },
      () => {
        const fp = s.getPeerCertificate().fingerprint256;
        s.end();
        resolve(fp);
      });
    s.on('error', reject);
  });
  const fingerprint = (file) => new crypto.X509Certificate(fs.readFileSync(file)).fingerprint256;
  assert.equal(await served(), fingerprint(`${pki}/server.pem`));
  const before = fingerprint(`${pki}/server.pem`);
  const t = Date.now();
  await logIn(VIEWER);
  await page.waitForSelector('#live.on', { timeout: 15000 });
  await page.evaluate(() => { window.__sameDocument = 'yes'; });
  // A rotation tool's way: the new key, then the new certificate, each
  // renamed into place (hubd tries the pair on each change; the first, a
  // key that is not the certificate's, keeps the old pair in force).
  const rotated = fingerprint(`${pki}/other_server.pem`);
  for (const ext of ['key', 'pem']) {
    fs.copyFileSync(`${pki}/other_server.${ext}`, `${pki}/server.${ext}.new`);
    fs.renameSync(`${pki}/server.${ext}.new`, `${pki}/server.${ext}`);
  }
  const swapped = Date.now();
  await until(async () => (await served()) === rotated, 'the rotated certificate');
  console.log(`# console: the rotated certificate served ${Date.now() - swapped} ms after the swap`);
  assert.notEqual(rotated, before);
  // The page loaded before the rotation is still the same, live document.
  assert.equal(await page.evaluate(() => window.__sameDocument), 'yes');
  await watcher.shows('the page still live after the rotation', t, () => !!document.querySelector('#live.on'));
  const status = await page.evaluate(async () => (await fetch('/api/fleet')).status);
  assert.equal(status, 200);
});

test('repeated failed logins from one address are refused with 429 and Retry-After, even with a right token', async () => {
  const login = (token) => page.evaluate(async (tk) => {
    const r = await fetch('/api/login', {
      method: 'POST', body: JSON.stringify({ token: tk }), headers: { 'Content-Type': 'application/json' },
    });
    return { status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.json() };
  }, token);
  // The viewer's login above forgot this address's earlier failure.
  for (let i = 0; i < 10; i += 1) {
    const r = await login(`not-a-token-${i}`);
    assert.equal(r.status, 401, `attempt ${i}`);
  }
  const refused = await login('not-a-token-again');
  assert.equal(refused.status, 429);
  assert.equal(refused.body.reason, 'CONSOLE_LOGIN_RATE_LIMITED');
  const wait = Number(refused.retryAfter);
  assert.ok(wait >= 1 && wait <= 60, `Retry-After ${refused.retryAfter}`);
  assert.equal(refused.body.retry_after_s, wait);
  // While refused, the right token is refused too: a guesser learns nothing.
  const right = await login(VIEWER);
  assert.equal(right.status, 429);
  // The form says so.
  await page.goto(`${base}/`, { waitUntil: 'load' });
  await page.evaluate(async () => {
    const s = await (await fetch('/api/session')).json();
    await fetch('/api/logout', { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json', 'X-Console-CSRF': s.csrf } });
  });
  await logIn(VIEWER);
  await page.waitForFunction(() => /too many failed logins/.test(document.querySelector('#login-error').textContent),
    { timeout: 15000 });
});
