'use strict';
// The web console in a real browser: Debian's chromium, headless, driven by
// puppeteer-core ($HUB_CONSOLE_MODULES; no browser download), against a real
// hubd ($HUBD) that the Node client drives over gRPC. Each change is made
// through the public API and the test waits for the page to show it without
// a reload (it waits for the DOM, never sleeps a fixed time), printing how
// long it took. Screenshots of each view go to $TEST_UNDECLARED_OUTPUTS_DIR.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('http');
const { HubClient, PresenceSession, toStruct } = require('../../clients/node/lib');
const { once } = require('../../clients/node/test/hubd');
const {
  DEADLINE_MS, until, startHubd, launch, Watcher, screenshot: shot, cleanUp,
} = require('./browser');

const PROJECT = 'prj_CONSOLEBROWSERTESTAAAA';
const CTO = { projectId: PROJECT, kind: 'ROLE_KIND_CTO' };
let hubd;
let client;
let browser;
let page;
let base;
const sessions = [];
let watcher;
let dialogAnswer = true;
let lastDialog = null;
let promptAnswer;

async function shows(what, sinceMs, fn, arg) {
  return watcher.shows(what, sinceMs, fn, arg);
}

function session(agentId, extra = {}) {
  const s = new PresenceSession(client, {
    agentId, cli: 'AGENT_CLI_CLAUDE', heartbeatTtlMs: 30000,
    backoffInitialMs: 100, backoffMaxMs: 1000, ...extra,
  });
  sessions.push(s);
  return s;
}

function screenshot(view, name) {
  return shot(page, view, name);
}

before(async () => {
  ({ hubd, base } = await startHubd('console', ['--detach_grace=300ms']));
  client = new HubClient(hubd.address);
  browser = await launch();
  page = await browser.newPage();
  watcher = new Watcher(page);
  await page.setViewport({ width: 1280, height: 900 });
  page.on('pageerror', (e) => console.log(`# page error: ${e.message}`));
  page.on('dialog', (d) => {
    lastDialog = d.type();
    return dialogAnswer ? d.accept(promptAnswer) : d.dismiss();
  });
});

after(() => cleanUp({ sessions, browser, clients: [client], hubs: [hubd], watcher }));

test('the page and every response carry a strict Content-Security-Policy', async () => {
  for (const p of ['/', '/console.js', '/api/session', '/api/fleet', '/metrics', '/nothing']) {
    const r = await fetch(base + p);
    const csp = r.headers.get('content-security-policy') || '';
    assert.match(csp, /default-src 'none'/, p);
    assert.match(csp, /script-src 'self'(;|$)/, p);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, p);
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff', p);
  }
});

test('a state-changing request without the CSRF token or from another origin is refused', async () => {
  const s = await fetch(`${base}/api/session`);
  const cookie = s.headers.get('set-cookie').split(';')[0];
  const body = JSON.stringify({ wire: 'rk2.x' });
  const json = { 'Content-Type': 'application/json', Cookie: cookie };
  let r = await fetch(`${base}/api/roles/ensure`, { method: 'POST', headers: json, body });
  assert.equal(r.status, 403);
  assert.equal((await r.json()).reason, 'CSRF_TOKEN_INVALID');
  const { csrf } = await s.json();
  r = await fetch(`${base}/api/roles/ensure`, {
    method: 'POST', body, headers: { ...json, 'X-Console-CSRF': csrf, Origin: 'http://evil.example' },
  });
  assert.equal(r.status, 403);
  assert.equal((await r.json()).reason, 'ORIGIN_NOT_ALLOWED');
  r = await fetch(`${base}/api/roles/ensure`, {
    method: 'POST', body, headers: { Cookie: cookie, 'X-Console-CSRF': csrf, 'Content-Type': 'text/plain' },
  });
  assert.equal(r.status, 415);
  // A name that rebinds to loopback is not this console's (fetch may not
  // set Host: a plain request does).
  const rebound = await new Promise((resolve, reject) => {
    http.get(`${base}/api/session`, { headers: { Host: 'attacker.example:80' } }, (res) => {
      res.resume();
      resolve(res.statusCode);
    }).on('error', reject);
  });
  assert.equal(rebound, 403);
});

test('agents, a failover and a publish to a role without holder show up live, without a reload', async () => {
  await page.goto(base + '/', { waitUntil: 'load' });
  await page.waitForSelector('#live.on', { timeout: DEADLINE_MS });
  await page.evaluate(() => { window.__sameDocument = 'yes'; });
  // The role cards are built once their view is shown; they stay live.
  await page.click('#tabs button[data-view="roles"]');

  // Two cto candidates: alpha (priority 10) is elected, beta waits.
  const alpha = session('console-alpha', { projectId: PROJECT, capabilities: ['role:cto:candidate'] });
  const beta = session('console-beta', { projectId: PROJECT, capabilities: ['role:cto:candidate'] });
  let t = Date.now();
  await alpha.start();
  await shows('a registered agent', t,
    () => !!document.querySelector('tr[data-agent-id="console-alpha"] td.status-online'));
  await beta.start();
  await client.roles.upsertRoleCandidate({ roleKey: CTO, agentId: 'console-beta', candidate: { priority: 5 } });
  t = Date.now();
  await client.roles.upsertRoleCandidate({ roleKey: CTO, agentId: 'console-alpha', candidate: { priority: 10 } });
  const { wire: ctoWire } = await client.hub.encodeRoleKey({ roleKey: CTO });
  await client.roles.ensureRole({ roleKey: CTO, trigger: 'ENSURE_ROLE_TRIGGER_MANUAL', causeId: 'console-test' });
  await until(async () => (await client.roles.getRole({ roleKey: CTO })).role.state === 'ROLE_STATE_ACTIVE',
    'alpha to hold cto');
  await shows('the cto election', t, (w) => {
    const card = document.querySelector(`.role[data-wire="${w}"]`);
    return card && card.querySelector('.state').textContent === 'active' &&
      card.querySelector('.holder .v').textContent === 'console-alpha';
  }, ctoWire);
  await shows('the role held in the fleet row', t, () => {
    const td = document.querySelector('tr[data-agent-id="console-alpha"] td.roles');
    return td && td.textContent === 'cto';
  });

  // alpha's session ends: after the detach grace the hub fails cto over.
  const epochBefore = (await client.roles.getRole({ roleKey: CTO })).role.epoch;
  t = Date.now();
  await alpha.stop();
  await shows('the failover to beta', t, (w) => {
    const card = document.querySelector(`.role[data-wire="${w}"]`);
    return card && card.querySelector('.state').textContent === 'active' &&
      card.querySelector('.holder .v').textContent === 'console-beta';
  }, ctoWire);
  const card = await page.$eval(`.role[data-wire="${ctoWire}"]`, (c) => ({
    epoch: c.querySelector('.epoch .v').textContent,
    timeline: [...c.querySelectorAll('.timeline li')].map((li) => li.textContent),
  }));
  const { role } = await client.roles.getRole({ roleKey: CTO });
  assert.equal(card.epoch, String(role.epoch));
  assert.ok(Number(role.epoch) > Number(epochBefore));
  assert.ok(card.timeline.some((l) => / active holder=console-alpha /.test(l)), card.timeline.join('\n'));
  assert.ok(card.timeline.some((l) => / active holder=console-beta /.test(l)), card.timeline.join('\n'));
  await shows('alpha detached', t,
    () => document.querySelector('tr[data-agent-id="console-alpha"] td.attached').textContent === 'no');

  // A lead role nobody holds: the message waits as its backlog.
  const lead = { projectId: PROJECT, kind: 'ROLE_KIND_LEAD', scopeId: 'scp_CONSOLEBACKENDAAAAAAAA' };
  const { wire: leadWire, topic } = await client.hub.encodeRoleKey({ roleKey: lead });
  t = Date.now();
  const published = await client.messages.publish({
    fromAgentId: 'console-beta', to: topic, payload: toStruct({ text: 'for whoever leads' }),
  });
  assert.equal(published.recipientCount, 0);
  await shows('the backlog of a role without holder', t, (w) => {
    const c = document.querySelector(`.role[data-wire="${w}"]`);
    return c && c.querySelector('.waiting .v').textContent === '1' &&
      c.querySelector('.holder .v').textContent === '—';
  }, leadWire);

  await shows('the failover event', t,
    () => !!document.querySelector('#events li[data-event="role_failover"]'));
  assert.equal(await page.evaluate(() => window.__sameDocument), 'yes', 'the page was reloaded');

  await screenshot('fleet', 'fleet');
  await screenshot('roles', 'roles');
  await screenshot('events', 'events');
});

test('a candidate elected for the lead role takes its backlog, live', async () => {
  const lead = { projectId: PROJECT, kind: 'ROLE_KIND_LEAD', scopeId: 'scp_CONSOLEBACKENDAAAAAAAA' };
  const { wire } = await client.hub.encodeRoleKey({ roleKey: lead });
  const gamma = session('console-gamma', { projectId: PROJECT, capabilities: ['role:lead:candidate'] });
  const delivered = once(gamma, 'message');
  await gamma.start();
  const t = Date.now();
  await client.roles.upsertRoleCandidate({ roleKey: lead, agentId: 'console-gamma', candidate: { priority: 1 } });
  await shows('the lead elected and its backlog handed over', t, (w) => {
    const c = document.querySelector(`.role[data-wire="${w}"]`);
    return c && c.querySelector('.holder .v').textContent === 'console-gamma' &&
      c.querySelector('.state').textContent === 'active' &&
      c.querySelector('.waiting .v').textContent === '0' &&
      c.querySelector('.backlog .v').textContent === '1';
  }, wire);
  await shows('the handed-over message in gamma\'s pending inbox', t,
    () => document.querySelector('tr[data-agent-id="console-gamma"] td.pending').textContent === '1');
  // gamma acknowledges it: its inbox and the role's backlog empty.
  const [, ack] = await delivered;
  const acked = Date.now();
  await ack();
  await shows('the acknowledged backlog', acked, (w) =>
    document.querySelector('tr[data-agent-id="console-gamma"] td.pending').textContent === '0' &&
    document.querySelector(`.role[data-wire="${w}"] .backlog .v`).textContent === '0', wire);
});

test('messages show each recipient\'s state live, and what agents send shows as text, never markup', async () => {
  await page.evaluate(() => {
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective));
  });
  // An agent id with every odd character the API allows.
  const odd = 'console-x:odd.id-1_';
  const x = session(odd, { projectId: PROJECT });
  const delivered = once(x, 'message');
  await x.start();
  const payload = {
    script: '<script>window.__xss = 1</script>',
    img: '<img src=x onerror="window.__xss = 2">',
    attr: '"><svg onload="window.__xss = 3"></svg>',
    entity: '&lt;b&gt;not bold&lt;/b&gt;',
  };
  let t = Date.now();
  const published = await client.messages.publish({
    fromAgentId: 'console-beta', to: odd, payload: toStruct(payload), traceId: 'trace-console-xss-1',
  });
  const row = (id) => `#messages tr[data-message-id="${id}"]`;
  await shows('a published message, delivered', t, (sel) => {
    const r = document.querySelector(sel);
    return r && r.querySelector('.recipients').textContent === 'console-x:odd.id-1_: delivered';
  }, row(published.messageId));
  const [, ack] = await delivered;
  t = Date.now();
  await ack();
  await shows('the recipient\'s ack', t, (sel) =>
    document.querySelector(sel).querySelector('.recipients').textContent === 'console-x:odd.id-1_: acked',
  row(published.messageId));

  await page.click('#tabs button[data-view="messages"]');
  const shown = await page.$eval(`${row(published.messageId)} .payload`, (td) => td.textContent);
  assert.deepEqual(JSON.parse(shown), payload);
  assert.equal(await page.$eval(`${row(published.messageId)} .payload`, (td) => td.children.length), 0);
  assert.equal(await page.$eval(`tr[data-agent-id="${odd}"] td.agent`, (td) => td.textContent), odd);
  const dom = await page.evaluate(() => ({
    xss: typeof window.__xss,
    scripts: [...document.scripts].map((sc) => sc.getAttribute('src')),
    markup: document.querySelectorAll('main img, main svg, #messages b, #trace b').length,
    violations: window.__violations,
  }));
  assert.deepEqual(dom, { xss: 'undefined', scripts: ['/console.js'], markup: 0, violations: [] });

  // Its trace, from the page.
  await page.click(`${row(published.messageId)} button.trace`);
  await page.waitForFunction((id) => !!document.querySelector(`#trace-list li[data-message-id="${id}"]`),
    { timeout: 15000 }, published.messageId);

  // A message nobody takes before it expires becomes a dead letter, live.
  const late = session('console-late', { projectId: PROJECT });
  await late.start();
  await late.stop();
  t = Date.now();
  const expiring = await client.messages.publish({
    fromAgentId: 'console-beta', to: 'console-late', ttl: { seconds: 1 },
    payload: toStruct({ text: 'nobody reads this' }),
  });
  await shows('the dead letter (1 s TTL, then the sweep)', t, (id) => {
    const r = document.querySelector(`#dead-letters tr[data-message-id="${id}"]`);
    return r && r.querySelector('.reason').textContent === 'ttl_expired' &&
      document.querySelector(`#messages tr[data-message-id="${id}"] .status`).textContent === 'dead_letter';
  }, expiring.messageId);
  await screenshot('messages', 'messages');
});

test('an operator forces an election from the page only after confirming it', async () => {
  const { wire } = await client.hub.encodeRoleKey({ roleKey: CTO });
  await page.click('#tabs button[data-view="roles"]');
  const before = await page.$eval('#action-result', (e) => e.textContent);
  dialogAnswer = false;
  await page.click(`.role[data-wire="${wire}"] button.ensure`);
  assert.equal(lastDialog, 'confirm');
  assert.equal(await page.$eval('#action-result', (e) => e.textContent), before);
  dialogAnswer = true;
  const t = Date.now();
  await page.click(`.role[data-wire="${wire}"] button.ensure`);
  await shows('the EnsureRole receipt', t,
    () => /^EnsureRole prj_\S+ cto: /.test(document.querySelector('#action-result').textContent));
  const receipt = await page.$eval('#action-result', (e) => e.textContent);
  const { role } = await client.roles.getRole({ roleKey: CTO });
  assert.equal(receipt, `EnsureRole ${PROJECT} cto: already_active ` +
    `(state active, holder ${role.holderAgentId}, epoch ${role.epoch})`);
});

test('an operator closes a lead scope from the page: its card goes, its waiting messages become dead letters', async () => {
  const lead = { projectId: PROJECT, kind: 'ROLE_KIND_LEAD', scopeId: 'scp_CONSOLECLOSEDAAAAAAAAA' };
  const { wire, topic } = await client.hub.encodeRoleKey({ roleKey: lead });
  const waiting = await client.messages.publish({
    fromAgentId: 'console-beta', to: topic, payload: toStruct({ text: 'never read' }),
  });
  await page.click('#tabs button[data-view="roles"]');
  await page.waitForSelector(`.role[data-wire="${wire}"] button.close-scope`, { timeout: 15000 });
  promptAnswer = 'the backend work is done';
  dialogAnswer = true;
  const t = Date.now();
  await page.click(`.role[data-wire="${wire}"] button.close-scope`);
  assert.equal(lastDialog, 'prompt');
  await shows('the closed scope', t, (w) => !document.querySelector(`.role[data-wire="${w}"]`) &&
    document.querySelector('#action-result').textContent ===
      `CloseRoleScope ${'prj_CONSOLEBROWSERTESTAAAA'} lead/scp_CONSOLECLOSEDAAAAAAAAA: closed by anonymous ` +
      '(reason: the backend work is done; 0 candidate(s) removed, 1 message(s) dead-lettered)', wire);
  await shows('its message among the dead letters', t, (id) => {
    const r = document.querySelector(`#dead-letters tr[data-message-id="${id}"]`);
    return r && r.querySelector('.reason').textContent === 'ROLE_SCOPE_CLOSED';
  }, waiting.messageId);
  const { closedScopes } = await client.roles.listClosedScopes({ projectId: PROJECT });
  assert.deepEqual(closedScopes.map((c) => [c.roleKey.scopeId, c.closedBy, c.reason]),
    [['scp_CONSOLECLOSEDAAAAAAAAA', 'anonymous', 'the backend work is done']]);
});

test('an operator re-drives a dead letter from the page after confirming it, and its agent gets it', async () => {
  // A message to an agent that is away expires into a dead letter.
  const away = session('console-away', { projectId: PROJECT });
  await away.start();
  await away.stop();
  let t = Date.now();
  const expiring = await client.messages.publish({
    fromAgentId: 'console-beta', to: 'console-away', ttl: { seconds: 1 },
    payload: toStruct({ text: 'try again later' }),
  });
  const dead = (id) => `#dead-letters tr[data-message-id="${id}"]`;
  await page.click('#tabs button[data-view="messages"]');
  await shows('the dead letter with its re-drive button', t,
    (sel) => !!document.querySelector(`${sel} button.redrive`), dead(expiring.messageId));

  // The agent is back; nothing reaches it until an operator re-drives.
  const back = session('console-away', { projectId: PROJECT });
  const delivered = once(back, 'message');
  await back.start();
  const before = await page.$eval('#dead-letter-result', (e) => e.textContent);
  dialogAnswer = false;
  await page.click(`${dead(expiring.messageId)} button.redrive`);
  assert.equal(lastDialog, 'confirm');
  assert.equal(await page.$eval('#dead-letter-result', (e) => e.textContent), before);
  assert.ok(await page.$(dead(expiring.messageId)), 'a dismissed re-drive changed nothing');

  dialogAnswer = true;
  t = Date.now();
  await page.click(`${dead(expiring.messageId)} button.redrive`);
  await shows('the re-drive\'s answer', t, (id) =>
    document.querySelector('#dead-letter-result').textContent ===
      `RedriveDeadLetter ${id}: delivered, queued for console-away (pushed to console-away)`,
  expiring.messageId);
  await shows('the dead letter gone and the message delivered again, live', t, (id) =>
    !document.querySelector(`#dead-letters tr[data-message-id="${id}"]`) &&
    document.querySelector(`#messages tr[data-message-id="${id}"] .recipients`).textContent ===
      'console-away: delivered', expiring.messageId);
  const [message, ack] = await delivered;
  assert.equal(message.message.messageId, expiring.messageId);
  t = Date.now();
  await ack();
  await shows('its ack', t, (id) =>
    document.querySelector(`#messages tr[data-message-id="${id}"] .recipients`).textContent ===
      'console-away: acked', expiring.messageId);

  // A dead letter of a closed scope stays one: the page shows the refusal.
  const { deadLetters } = await client.messages.listDeadLetters({ reason: 'ROLE_SCOPE_CLOSED' });
  assert.ok(deadLetters.length > 0);
  const closedId = deadLetters[0].messageId;
  await page.click(`${dead(closedId)} button.redrive`);
  await shows('the refusal of a closed scope\'s dead letter', Date.now(), () =>
    /^RedriveDeadLetter \S+ refused: ROLE_SCOPE_CLOSED /.test(
      document.querySelector('#dead-letter-result').textContent));
  assert.ok(await page.$(dead(closedId)));
  await screenshot('messages', 'messages');
});

test('reservations show live with their holder, patterns, mode, token and reason as text, and an operator releases one', async () => {
  await page.evaluate(() => { window.__violations = window.__violations || []; });
  await page.click('#tabs button[data-view="reservations"]');
  const row = (id) => `#reservations tr[data-reservation-id="${id}"]`;
  const reason = '<img src=x onerror="window.__xss = 4"> & <b>review</b>';
  let t = Date.now();
  const { reservation: held } = await client.reservations.reserve({
    projectId: PROJECT, agentId: 'console-beta', patterns: ['src/console/**', 'docs/console.md'],
    mode: 'RESERVATION_MODE_EXCLUSIVE', reason,
  });
  await shows('a reservation granted', t, (sel) => {
    const r = document.querySelector(sel);
    return r && r.querySelector('.holder').textContent === 'console-beta';
  }, row(held.reservationId));
  const cells = await page.$eval(row(held.reservationId), (r) => ({
    patterns: r.querySelector('.patterns').textContent,
    mode: r.querySelector('.mode').textContent,
    token: r.querySelector('.token').textContent,
    reason: r.querySelector('.reason').textContent,
    markup: r.querySelectorAll('img, b').length,
  }));
  assert.deepEqual(cells, {
    patterns: held.patterns.join(' '), mode: 'exclusive', token: String(held.token), reason, markup: 0,
  });
  assert.equal(await page.evaluate(() => typeof window.__xss), 'undefined');

  // A shared one next to it, short-lived: it goes by itself when it expires.
  t = Date.now();
  const { reservation: brief } = await client.reservations.reserve({
    projectId: PROJECT, agentId: 'console-gamma', patterns: ['README.md'],
    mode: 'RESERVATION_MODE_SHARED', ttl: { seconds: 1 }, reason: 'a quick look',
  });
  await shows('a shared reservation', t, (sel) =>
    document.querySelector(`${sel} .mode`)?.textContent === 'shared', row(brief.reservationId));
  await screenshot('reservations', 'reservations');
  await shows('its expiry', t, (sel) => !document.querySelector(sel), row(brief.reservationId));

  // The operator's release, after a confirmation (a dismissed one changes
  // nothing); the holder's next fenced write with the token is refused.
  dialogAnswer = false;
  await page.click(`${row(held.reservationId)} button.release`);
  assert.equal(lastDialog, 'confirm');
  assert.ok(await page.$(row(held.reservationId)));
  dialogAnswer = true;
  t = Date.now();
  await page.click(`${row(held.reservationId)} button.release`);
  await shows('the release, live', t, (sel) => !document.querySelector(sel), row(held.reservationId));
  assert.equal(await page.$eval('#reservation-result', (e) => e.textContent),
    `ForceReleaseReservation ${held.reservationId}: released console-beta's ` +
    `${held.patterns.join(' ')} (token ${held.token}) as anonymous`);
  const { reservations } = await client.reservations.listReservations({ projectId: PROJECT });
  assert.deepEqual(reservations, []);
  await assert.rejects(client.reservations.renewReservation({
    reservationId: held.reservationId, agentId: 'console-beta', token: held.token,
  }), (e) => client.toHubError(e).reason === 'RESERVATION_NOT_FOUND');
  assert.deepEqual(await page.evaluate(() => window.__violations), []);
});

test('a reserve waiting for a held path shows under its project live, and leaves when it is granted or its deadline passes', async () => {
  await page.click('#tabs button[data-view="reservations"]');
  const waiter = (agent) => page.evaluate((a) => [...document.querySelectorAll(
    '#reservation-waits tbody tr')].filter((tr) => tr.querySelector('.agent').textContent === a)
    .map((tr) => ({
      id: tr.dataset.waiterId,
      project: tr.cells[0].textContent,
      patterns: tr.querySelector('.patterns').textContent,
      mode: tr.querySelector('.mode').textContent,
      waitsFor: tr.querySelector('.waits-for').textContent,
      deadline: tr.querySelector('.deadline').textContent,
    })), agent);
  const waiting = (agent) => [...document.querySelectorAll('#reservation-waits tbody tr .agent')]
    .some((td) => td.textContent === agent);
  const { reservation: held } = await client.reservations.reserve({
    projectId: PROJECT, agentId: 'console-beta', patterns: ['src/wait/**'],
    mode: 'RESERVATION_MODE_EXCLUSIVE', reason: 'held while another waits',
  });

  // gamma waits for beta's path (up to 8 s): a row under the project.
  let t = Date.now();
  const granted = client.reservations.reserve({
    projectId: PROJECT, agentId: 'console-gamma', patterns: ['src/wait/a.txt'],
    mode: 'RESERVATION_MODE_EXCLUSIVE', wait: { seconds: 8 },
  });
  await shows('a waiting reserve', t, waiting, 'console-gamma');
  const [row] = await waiter('console-gamma');
  assert.equal(row.project, PROJECT);
  assert.equal(row.patterns, 'src/wait/a.txt');
  assert.equal(row.mode, 'exclusive');
  // It names the reservation it waits behind, its holder and patterns.
  assert.equal(row.waitsFor, `${held.reservationId} (console-beta: ${held.patterns.join(' ')})`);
  assert.match(row.deadline, /^[1-8]s$/);
  assert.equal(await page.$eval('#reservation-waits-count', (e) => e.textContent),
    '1 reserve(s) waiting');
  await screenshot('reservations', 'reservation-waits');

  // beta releases: gamma's wait is granted; its row goes, its reservation
  // shows.
  t = Date.now();
  await client.reservations.releaseReservation({
    reservationId: held.reservationId, agentId: 'console-beta', token: held.token,
  });
  const { reservation: got } = await granted;
  await shows('the waiter granted, gone from the waits', t, ([id, rid]) =>
    !document.querySelector(`#reservation-waits tr[data-waiter-id="${id}"]`) &&
    document.querySelector(`#reservations tr[data-reservation-id="${rid}"] .holder`)
      ?.textContent === 'console-gamma', [row.id, got.reservationId]);
  assert.equal(await page.$eval('#reservation-waits-count', (e) => e.textContent),
    'no reserve waiting');

  // beta now waits for gamma's path, 1.5 s: its row goes at its deadline.
  t = Date.now();
  const refused = client.reservations.reserve({
    projectId: PROJECT, agentId: 'console-beta', patterns: ['src/wait/*'],
    mode: 'RESERVATION_MODE_SHARED', wait: { seconds: 1, nanos: 500000000 },
  }).then(() => null, (e) => client.toHubError(e).reason);
  await shows('a second waiter', t, waiting, 'console-beta');
  const [second] = await waiter('console-beta');
  assert.equal(second.mode, 'shared');
  assert.equal(second.waitsFor, `${got.reservationId} (console-gamma: src/wait/a.txt)`);
  assert.equal(await refused, 'RESERVATION_CONFLICT');
  t = Date.now();
  await shows('the wait ended at its deadline', t, (id) =>
    !document.querySelector(`#reservation-waits tr[data-waiter-id="${id}"]`), second.id);
  // A new load shows no waiter either: the hub's view dropped both.
  const snapshot = await page.evaluate(async () =>
    (await fetch('/api/reservations', { credentials: 'same-origin' })).json());
  assert.deepEqual(snapshot.waiters, []);
  await client.reservations.releaseReservation({
    reservationId: got.reservationId, agentId: 'console-gamma', token: got.token,
  });
});

test('a re-drive to a full inbox is refused on the page with the limit it hit, and changes nothing', async () => {
  // A hub whose inboxes hold one pending message.
  const { hubd: small, base: smallBase } = await startHubd('console-full',
    ['--max_pending_per_inbox=1']);
  const c = new HubClient(small.address);
  const p = await browser.newPage();
  p.on('dialog', (d) => d.accept());
  try {
    await c.presence.registerAgent({ agentId: 'console-full', cli: 'AGENT_CLI_CLAUDE' });
    const expiring = await c.messages.publish({
      fromAgentId: 'console-sender', to: 'console-full', ttl: { seconds: 1 },
      payload: toStruct({ text: 'expires' }),
    });
    await p.goto(smallBase + '/', { waitUntil: 'load' });
    await p.waitForSelector('#live.on', { timeout: DEADLINE_MS });
    await p.click('#tabs button[data-view="messages"]');
    const dead = `#dead-letters tr[data-message-id="${expiring.messageId}"] button.redrive`;
    await p.waitForSelector(dead, { timeout: DEADLINE_MS });
    // The inbox is full again.
    const waiting = await c.messages.publish({
      fromAgentId: 'console-sender', to: 'console-full', payload: toStruct({ text: 'waits' }),
    });
    await p.click(dead);
    await p.waitForFunction(() => document.querySelector('#dead-letter-result.error'),
      { timeout: DEADLINE_MS, polling: 'mutation' });
    const shown = await p.$eval('#dead-letter-result', (e) => e.textContent);
    assert.match(shown, new RegExp(`^RedriveDeadLetter ${expiring.messageId} refused: ` +
      'LIMIT_EXCEEDED .*\\(agent_id=console-full limit=max_pending_per_inbox limit_value=1\\)$'));
    await shot(p, 'messages', 'redrive-refused');
    // Nothing changed: still a dead letter (its row stays), the inbox holds
    // the one message.
    assert.ok(await p.$(dead));
    const { deadLetters } = await c.messages.listDeadLetters({});
    assert.deepEqual(deadLetters.map((d) => d.messageId), [expiring.messageId]);
    const { deliveries } = await c.messages.listPending({ agentId: 'console-full', peek: true });
    assert.deepEqual(deliveries.map((d) => d.message.messageId), [waiting.messageId]);
  } finally {
    await p.close();
    c.close();
    await small.stop();
  }
});

test('every fleet column, role fact and kind of event the issue names shows what the API says', async () => {
  const p = await browser.newPage();
  await p.setViewport({ width: 1280, height: 900 });
  const w = new Watcher(p);
  try {
    await p.goto(base + '/', { waitUntil: 'load' });
    await p.waitForSelector('#live.on', { timeout: DEADLINE_MS });
    await p.click('#tabs button[data-view="roles"]');
    // An agent of another CLI, the only candidate of a lead role.
    const lead = { projectId: PROJECT, kind: 'ROLE_KIND_LEAD', scopeId: 'scp_CONSOLEFACTSAAAAAAAAAA' };
    const { wire } = await client.hub.encodeRoleKey({ roleKey: lead });
    const facts = session('console-facts', {
      projectId: PROJECT, cli: 'AGENT_CLI_CODEX', capabilities: ['role:lead:candidate'],
    });
    await facts.start();
    let t = Date.now();
    await client.roles.upsertRoleCandidate({ roleKey: lead, agentId: 'console-facts', candidate: { priority: 3 } });
    // A candidate written shows in its role's card before any election.
    await w.shows('a new candidate in its role\'s card', t, (x) => {
      const tr = document.querySelector(`.role[data-wire="${x}"] .candidates tr[data-agent-id="console-facts"]`);
      return tr && tr.cells[1].textContent === '3';
    }, wire);
    // And a candidate removed leaves it.
    await client.roles.upsertRoleCandidate({ roleKey: lead, agentId: 'console-beta', candidate: { priority: 1 } });
    await w.shows('a second candidate in the card', t, (x) =>
      !!document.querySelector(`.role[data-wire="${x}"] .candidates tr[data-agent-id="console-beta"]`), wire);
    t = Date.now();
    await client.roles.removeRoleCandidate({ roleKey: lead, agentId: 'console-beta' });
    await w.shows('a removed candidate gone from the card', t, (x) =>
      !document.querySelector(`.role[data-wire="${x}"] .candidates tr[data-agent-id="console-beta"]`), wire);
    t = Date.now();
    await client.roles.ensureRole({ roleKey: lead, trigger: 'ENSURE_ROLE_TRIGGER_MANUAL', causeId: 'console-facts' });
    await w.shows('the lead elected, in its card and the fleet row', t, (x) => {
      const c = document.querySelector(`.role[data-wire="${x}"]`);
      const td = document.querySelector('tr[data-agent-id="console-facts"] td.roles');
      return c && c.querySelector('.state').textContent === 'active' && td &&
        td.textContent === 'lead/scp_CONSOLEFACTSAAAAAAAAAA';
    }, wire);
    // Fleet: status, CLI, attached, last seen, lease left, roles held,
    // pending inbox.
    const { agent } = await client.presence.getAgent({ agentId: 'console-facts' });
    const row = await p.$eval('tr[data-agent-id="console-facts"]', (tr) =>
      Object.fromEntries([...tr.cells].map((td) => [td.className.split(' ')[0], td.textContent])));
    assert.equal(row.project, PROJECT);
    assert.equal(row.status, 'online');
    assert.equal(row.cli, 'codex');
    assert.equal(row.attached, 'yes');
    assert.match(row['last-seen'], /^(just now|\d+s ago)$/);
    const leaseLeft = Number(/^(\d+)s$/.exec(row.lease)[1]);
    assert.ok(leaseLeft > 0 && leaseLeft <= 30, row.lease);
    assert.ok(agent.leaseExpiresAt, 'the API gives the lease too');
    assert.equal(row.pending, '0');
    // Roles: state, holder, epoch, activation seq, candidates with their
    // priority and reachability, the timeline with reasons.
    const { role } = await client.roles.getRole({ roleKey: lead });
    const card = await p.$eval(`.role[data-wire="${wire}"]`, (c) => ({
      holder: c.querySelector('.holder .v').textContent,
      epoch: c.querySelector('.epoch .v').textContent,
      seq: c.querySelector('.activation-seq .v').textContent,
      blocked: c.querySelector('.blocked .v').textContent,
      candidates: [...c.querySelectorAll('.candidates tbody tr')].map((tr) =>
        [...tr.cells].map((td) => td.textContent)),
      timeline: [...c.querySelectorAll('.timeline li')].map((li) => li.textContent),
    }));
    assert.equal(card.holder, 'console-facts');
    assert.equal(card.epoch, String(role.epoch));
    assert.equal(card.seq, String(role.activationSeq));
    assert.equal(card.blocked, '—');
    assert.deepEqual(card.candidates.map((c) => c.slice(0, 4)),
      [['console-facts', '3', 'operator', 'stream']]);
    assert.ok(card.timeline.some((l) => / active holder=console-facts .* reason=activation_acked/.test(l)),
      card.timeline.join('\n'));

    // A lead role nobody may hold: blocked, with its message in the
    // backlog list of the messages view.
    const orphan = { projectId: PROJECT, kind: 'ROLE_KIND_LEAD', scopeId: 'scp_CONSOLEORPHANAAAAAAAAA' };
    const { wire: orphanWire, topic } = await client.hub.encodeRoleKey({ roleKey: orphan });
    t = Date.now();
    await client.messages.publish({ fromAgentId: 'console-facts', to: topic, payload: toStruct({ n: 1 }) });
    await w.shows('a blocked role and its backlog', t, (x) => {
      const c = document.querySelector(`.role[data-wire="${x}"]`);
      const li = document.querySelector(`#backlog li[data-wire="${x}"]`);
      return c && c.querySelector('.blocked .v').textContent === 'no_candidate' && li &&
        / 1 message\(s\), electable, blocked: no_candidate$/.test(li.textContent);
    }, orphanWire);
    assert.equal((await client.roles.getRole({ roleKey: orphan })).role.blockedReason, 'no_candidate');

    // Events: a registration, a dead letter, a fencing refusal.
    const gone = session('console-gone', { projectId: PROJECT });
    await gone.start();
    await gone.stop();
    t = Date.now();
    const expiring = await client.messages.publish({
      fromAgentId: 'console-facts', to: 'console-gone', ttl: { seconds: 1 }, payload: toStruct({ n: 2 }),
    });
    await assert.rejects(client.presence.deregister({ agentId: 'console-facts', presenceGeneration: 999 }),
      (e) => e.reason === 'STALE_PRESENCE_OWNER');
    const event = ([name, text]) => [...document.querySelectorAll(`#events li[data-event="${name}"]`)]
      .some((li) => li.textContent.includes(text));
    await w.shows('the registration event', t, event, ['agent_registered', 'agent_id=console-gone']);
    await w.shows('the fencing refusal event', t, event, ['fencing_rejected', 'reason=STALE_PRESENCE_OWNER']);
    // It names the agent refused (from the refusal's metadata).
    assert.ok(await p.evaluate(() => [...document.querySelectorAll('#events li[data-event="fencing_rejected"]')]
      .some((li) => / agent_id=console-facts /.test(li.textContent))));
    await w.shows('the dead letter event', t, event,
      ['message_dead_lettered', `message_id=${expiring.messageId}`]);
  } finally {
    await p.close();
  }
});
