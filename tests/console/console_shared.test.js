'use strict';
// The console over several hubs sharing one PostgreSQL database
// (docs/design/multi-hub.md): the page of one hub shows the agents held by
// every hub, and follows, live, an election and a failover made by another
// hub (they reach it through the role change log), and an agent registered,
// a message published and acknowledged, and a job created, claimed and failed
// through another hub (they reach it through the console's hints).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { HubClient, PresenceSession, toStruct } = require('../../clients/node/lib');
const { Hubd, once } = require('../../clients/node/test/hubd');
const { until, launch, Watcher, screenshot, cleanUp } = require('./browser');
const { Postgres } = require('./postgres');

const PROJECT = 'prj_CONSOLESHAREDFLEETAAAA';
const CTO = { projectId: PROJECT, kind: 'ROLE_KIND_CTO' };

let pg;
const hubs = [];
const clients = [];
const sessions = [];
let browser;
let page;
let watcher;

async function hubd(url) {
  const h = await Hubd.start({
    dbPath: url, args: ['--metrics_listen=127.0.0.1:0', '--detach_grace=300ms'],
  });
  const m = await until(() => /metrics_address=(\S+)/.exec(h.output), 'the metrics address');
  h.base = `http://${m[1]}`;
  hubs.push(h);
  const c = new HubClient(h.address);
  clients.push(c);
  return [h, c];
}

function session(client, agentId) {
  const s = new PresenceSession(client, {
    agentId, projectId: PROJECT, cli: 'AGENT_CLI_GEMINI', heartbeatTtlMs: 30000,
    capabilities: ['role:cto:candidate'], backoffInitialMs: 100, backoffMaxMs: 1000,
  });
  sessions.push(s);
  return s;
}

before(async () => {
  pg = new Postgres();
  const url = pg.createDatabase('console');
  await hubd(url);
  await hubd(url);
  browser = await launch();
  page = await browser.newPage();
  watcher = new Watcher(page);
  await page.setViewport({ width: 1280, height: 800 });
});

after(async () => {
  await cleanUp({ sessions, browser, clients, hubs, watcher });
  if (pg) pg.stop();
});

test('the console of one hub shows every hub\'s agents and follows another hub\'s failover live', async () => {
  const [a, b] = [clients[0], clients[1]];
  // One agent held by hub A; the two cto candidates held by hub B.
  await session(a, 'shared-on-a').start();
  const first = session(b, 'shared-first');
  await first.start();
  await session(b, 'shared-second').start();
  await b.roles.upsertRoleCandidate({ roleKey: CTO, agentId: 'shared-first', candidate: { priority: 2 } });
  await b.roles.upsertRoleCandidate({ roleKey: CTO, agentId: 'shared-second', candidate: { priority: 1 } });
  const { wire } = await b.hub.encodeRoleKey({ roleKey: CTO });

  await page.goto(`${hubs[0].base}/`, { waitUntil: 'load' });
  await page.waitForSelector('#live.on', { timeout: 15000 });
  const ids = await page.$$eval('#fleet tr[data-agent-id]', (rows) => rows.map((r) => r.dataset.agentId));
  assert.deepEqual(ids, ['shared-first', 'shared-on-a', 'shared-second']);
  await page.click('#tabs button[data-view="roles"]');

  // Hub B elects, then fails the role over; hub A's page shows both.
  let t = Date.now();
  await b.roles.ensureRole({ roleKey: CTO, trigger: 'ENSURE_ROLE_TRIGGER_MANUAL', causeId: 'shared' });
  await watcher.shows('another hub\'s election', t, (w) => {
    const c = document.querySelector(`.role[data-wire="${w}"]`);
    return c && c.querySelector('.state').textContent === 'active' &&
      c.querySelector('.holder .v').textContent === 'shared-first';
  }, wire);
  t = Date.now();
  await first.stop();
  await watcher.shows('another hub\'s failover', t, (w) => {
    const c = document.querySelector(`.role[data-wire="${w}"]`);
    return c.querySelector('.state').textContent === 'active' &&
      c.querySelector('.holder .v').textContent === 'shared-second' &&
      [...c.querySelectorAll('.timeline li')].some((li) => /reason=holder_offline/.test(li.textContent));
  }, wire);
  await screenshot(page, 'roles', 'roles-shared');
});

test('the console of one hub shows, live, an agent registered and a message published through another hub', async () => {
  // Neither reaches hub A through the role change log: hub B hints A's
  // console after its commits (NOTIFY hub_console).
  const b = clients[1];
  await page.evaluate(() => { window.__sameDocument = 'yes'; });
  await page.click('#tabs button[data-view="fleet"]');
  const newcomer = new PresenceSession(b, {
    agentId: 'shared-newcomer', projectId: PROJECT, cli: 'AGENT_CLI_CODEX', heartbeatTtlMs: 30000,
    backoffInitialMs: 100, backoffMaxMs: 1000,
  });
  sessions.push(newcomer);
  const delivered = once(newcomer, 'message');
  let t = Date.now();
  await newcomer.start();
  await watcher.shows('an agent registered through another hub', t, () => {
    const row = document.querySelector('tr[data-agent-id="shared-newcomer"]');
    return row && !!row.querySelector('td.status-online');
  });

  t = Date.now();
  const published = await b.messages.publish({
    fromAgentId: 'shared-second', to: 'shared-newcomer', payload: toStruct({ text: 'through hub B' }),
  });
  await page.click('#tabs button[data-view="messages"]');
  await watcher.shows('a message published through another hub, delivered there', t, (id) => {
    const row = document.querySelector(`#messages tr[data-message-id="${id}"]`);
    return row && row.querySelector('.recipients').textContent === 'shared-newcomer: delivered';
  }, published.messageId);
  await watcher.shows('its recipient\'s pending inbox', t,
    () => document.querySelector('tr[data-agent-id="shared-newcomer"] td.pending').textContent === '1');
  const [, ack] = await delivered;
  t = Date.now();
  await ack();
  await watcher.shows('its ack through another hub', t, (id) =>
    document.querySelector(`#messages tr[data-message-id="${id}"] .recipients`).textContent ===
      'shared-newcomer: acked', published.messageId);
  // A path reservation through hub B (it reaches A's feed from the
  // reservation change log).
  await page.click('#tabs button[data-view="reservations"]');
  t = Date.now();
  const { reservation } = await b.reservations.reserve({
    projectId: PROJECT, agentId: 'shared-newcomer', patterns: ['src/shared'], reason: 'through hub B',
  });
  await watcher.shows('a reservation made through another hub', t, (id) =>
    document.querySelector(`#reservations tr[data-reservation-id="${id}"] .holder`)?.textContent ===
      'shared-newcomer', reservation.reservationId);
  t = Date.now();
  await b.reservations.releaseReservation({
    reservationId: reservation.reservationId, agentId: 'shared-newcomer', token: reservation.token,
  });
  await watcher.shows('its release through another hub', t, (id) =>
    !document.querySelector(`#reservations tr[data-reservation-id="${id}"]`), reservation.reservationId);
  assert.equal(await page.evaluate(() => window.__sameDocument), 'yes', 'the page was reloaded');
  await screenshot(page, 'messages', 'messages-shared');
});

test('the console of one hub shows, live, a job created, claimed and failed through another hub', async () => {
  // Jobs reach hub A's console through hub B's hints (NOTIFY hub_console),
  // read from the shared store.
  const b = clients[1];
  await page.click('#tabs button[data-view="jobs"]');
  const worker = new PresenceSession(b, {
    agentId: 'shared-job-worker', projectId: PROJECT, cli: 'AGENT_CLI_CODEX', heartbeatTtlMs: 30000,
  });
  sessions.push(worker);
  await worker.start();
  const row = (table, id) => `#${table} tr[data-job-id="${id}"]`;
  let t = Date.now();
  const { job } = await b.jobs.createJob({ projectId: PROJECT, supervisor: { agentId: 'shared-second' },
    worker: { agentId: 'shared-job-worker' }, task: 'through hub B', priority: 8 });
  await watcher.shows('a job created through another hub', t, (sel) => {
    const tr = document.querySelector(sel);
    return tr && tr.querySelector('td.priority').textContent === '8';
  }, row('jobs-queue', job.jobId));
  t = Date.now();
  const { job: claimed } = await b.jobs.claimJob({ agentId: 'shared-job-worker', jobId: job.jobId });
  await watcher.shows('its claim through another hub', t, (sel) => {
    const tr = document.querySelector(sel);
    return tr && tr.querySelector('td.attempt').textContent === '1 of 1';
  }, row('jobs-running', job.jobId));
  t = Date.now();
  await b.jobs.failJob({ attempt: claimed.attempt, error: { reason: 'shared_failure', retryable: false } });
  await watcher.shows('its failure through another hub', t, (sel) => {
    const tr = document.querySelector(sel);
    return tr && tr.querySelector('td.reason').textContent === 'shared_failure';
  }, row('jobs-failed', job.jobId));
  assert.equal(await page.$(row('jobs-running', job.jobId)), null);
  await worker.stop();
});

test('a hub started later shows the roles\' past transitions, read from the change log', async () => {
  const [late] = await hubd(hubs[0].dbPath);
  const { wire } = await clients[0].hub.encodeRoleKey({ roleKey: CTO });
  await page.goto(`${late.base}/`, { waitUntil: 'load' });
  await page.waitForSelector('#live.on', { timeout: 15000 });
  await page.click('#tabs button[data-view="roles"]');
  // The timeline is drawn once the change log is read: wait for its six
  // transitions (a loaded machine takes its time), then read them.
  await page.waitForFunction((sel) => document.querySelectorAll(sel).length >= 6, { timeout: 30000 },
    `.role[data-wire="${wire}"] .timeline li`);
  const timeline = await page.$$eval(`.role[data-wire="${wire}"] .timeline li`,
    (lis) => lis.map((li) => li.textContent.replace(/^\S+ \S+ /, '')));
  assert.deepEqual(timeline, [
    'v5 active holder=shared-second epoch=3 seq=3 reason=activation_acked',
    'v4 elected-probing holder=shared-second epoch=3 seq=3 reason=candidate_selected',
    'v3 electable holder=— epoch=2 seq=2 reason=holder_offline',
    'v2 active holder=shared-first epoch=1 seq=1 reason=activation_acked',
    'v1 elected-probing holder=shared-first epoch=1 seq=1 reason=candidate_selected',
    'v0 electable holder=— epoch=0 seq=0 reason=role_reserved',
  ]);
});

test('the page of a hub started while another hub\'s reserve waits lists the waiter', async () => {
  const [, b] = clients;
  for (const agentId of ['waits-holder', 'waits-waiter']) {
    await b.presence.registerAgent({ agentId, projectId: PROJECT, cli: 'AGENT_CLI_CODEX' });
  }
  const { reservation: held } = await b.reservations.reserve({
    projectId: PROJECT, agentId: 'waits-holder', patterns: ['src/queued'], reason: 'held',
  });
  const granted = b.reservations.reserve({
    projectId: PROJECT, agentId: 'waits-waiter', patterns: ['src/queued/a.txt'],
    mode: 'RESERVATION_MODE_EXCLUSIVE', wait: { seconds: 60 },
  });
  // Queued through hub B (ListReservations names who waits) ...
  await until(async () => {
    const { reservations } = await b.reservations.listReservations({
      projectId: PROJECT, agentId: 'waits-holder',
    });
    return reservations[0]?.waitingAgentIds?.includes('waits-waiter');
  }, 'the waiter queued');
  // ... before this hub started: it never saw the `waiting` change.
  const [late] = await hubd(hubs[0].dbPath);
  await page.goto(`${late.base}/`, { waitUntil: 'load' });
  await page.waitForSelector('#live.on', { timeout: 15000 });
  await page.click('#tabs button[data-view="reservations"]');
  const rows = await page.$$eval('#reservation-waits tbody tr', (trs) => trs.map((tr) => ({
    agent: tr.querySelector('.agent').textContent,
    patterns: tr.querySelector('.patterns').textContent,
    mode: tr.querySelector('.mode').textContent,
    waitsFor: tr.querySelector('.waits-for').textContent,
  })));
  assert.deepEqual(rows, [{
    agent: 'waits-waiter', patterns: 'src/queued/a.txt', mode: 'exclusive',
    waitsFor: `${held.reservationId} (waits-holder: src/queued)`,
  }]);
  assert.equal(await page.$eval('#reservation-waits-count', (e) => e.textContent),
    '1 reserve(s) waiting');
  await screenshot(page, 'reservations', 'reservation-waits-late-hub');

  // Released through hub B: the late hub's page drops the row, live.
  const t = Date.now();
  await b.reservations.releaseReservation({
    reservationId: held.reservationId, agentId: 'waits-holder', token: held.token,
  });
  const { reservation: got } = await granted;
  await watcher.shows('the waiter granted, gone from the late hub\'s waits', t, () =>
    !document.querySelector('#reservation-waits tbody tr'));
  await b.reservations.releaseReservation({
    reservationId: got.reservationId, agentId: 'waits-waiter', token: got.token,
  });
});

test('an agent registered while a hub could not send its hints shows on the other hub\'s page once it can', async () => {
  // Hub B's hints go out on a connection of its own (application_name
  // "hub console hints <its id>"); the server ends it, so that the hint of
  // the next change through B cannot be sent.
  const [, b] = clients;
  const id = /hub_instance_id=(\S+)/.exec(hubs[1].output)[1];
  const sender = `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hub console hints ${id}'`;
  await page.goto(`${hubs[0].base}/`, { waitUntil: 'load' });
  await page.waitForSelector('#live.on', { timeout: 15000 });
  await page.evaluate(() => { window.__sameDocument = 'yes'; });
  await page.click('#tabs button[data-view="fleet"]');
  await until(() => pg.sql('console', sender) === '1', 'hub B\'s hints connection');
  pg.sql('console', sender.replace('count(*)', 'pg_terminate_backend(pid)'));
  await until(() => pg.sql('console', sender) === '0', 'its end');
  const logged = hubs[1].output.length;

  // Its hint is dropped; hub B tries again by itself and sends a reset once
  // it can: hub A's page loads its snapshots again, with the agent.
  const t = Date.now();
  await b.presence.registerAgent({
    agentId: 'shared-unhinted', projectId: PROJECT, cli: 'AGENT_CLI_CODEX',
  });
  await watcher.shows('an agent whose hint was lost, after the reset', t,
    () => !!document.querySelector('tr[data-agent-id="shared-unhinted"]'));
  // Hub A may act on the reset before hub B's log line about it reaches
  // this process through B's stderr: wait for the line, do not assume it.
  await until(() => /console_hints_reset_sent/.test(hubs[1].output.slice(logged)),
    'hub B logs the reset it sent');
  assert.match(hubs[1].output.slice(logged), /console_hints_unsent/);
  assert.equal(await page.evaluate(() => window.__sameDocument), 'yes', 'the page was reloaded');
});
