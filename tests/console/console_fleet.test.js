'use strict';
// The fleet view of a large fleet in a real browser (docs/design/console.md,
// "The first load"): a real hubd with 10,000 agents over 100 projects, a
// fresh chromium for the first load, then searches, live changes and the
// merge of the whole fleet with the changes the stream brought meanwhile.
// Each change is made through the gRPC API; the test waits for the page to
// show it (never a fixed sleep) and prints how long it took.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { HubClient } = require('../../clients/node/lib');
const { DEADLINE_MS, startHubd, launch, Watcher, cleanUp } = require('./browser');

const AGENTS = 10000;
const PROJECTS = 100;
const project = (i) => `prj_CONSOLEFLEET${String(i % PROJECTS).padStart(10, '0')}`;
const agent = (i) => `fleet-agent-${String(i).padStart(5, '0')}`;
const CLIS = ['AGENT_CLI_CLAUDE', 'AGENT_CLI_CODEX', 'AGENT_CLI_GEMINI'];

let hubd;
let client;
let browser;
let base;
let watcher;

function register(i, extra = {}) {
  return client.presence.registerAgent({
    agentId: agent(i), cli: CLIS[i % 3], projectId: project(i),
    heartbeatTtl: { seconds: 7200 }, ...extra,
  });
}

async function newPage() {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.on('pageerror', (e) => console.log(`# page error: ${e.message}`));
  return page;
}

// The fleet's count line, and the agent rows in the DOM.
function fleetShown(page) {
  return page.evaluate(() => ({
    count: document.querySelector('#fleet-count').textContent,
    rows: [...document.querySelectorAll('#fleet tr[data-agent-id]')].map((tr) => tr.dataset.agentId),
  }));
}

async function search(page, q) {
  await page.$eval('#fleet-filter', (input, value) => {
    input.value = value;
    input.dispatchEvent(new Event('input'));
  }, q);
}

before(async () => {
  ({ hubd, base } = await startHubd('console-fleet', []));
  client = new HubClient(hubd.address, { deadlineMs: 60000 });
  let next = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < AGENTS) await register(next++);
  }));
  browser = await launch();  // a fresh profile: the first load is cold
});

after(() => cleanUp({ browser, clients: [client], hubs: [hubd], watcher }));

test('the fleet API gives a page its first rows in the table\'s order with every count, and refuses a bad first', async () => {
  const s = await fetch(`${base}/api/session`);
  const cookie = s.headers.get('set-cookie').split(';')[0];
  const get = (q) => fetch(`${base}/api/fleet${q}`, { headers: { Cookie: cookie } });
  const first = await (await get('?first=5')).json();
  assert.equal(first.partial, true);
  // Project, then agent id: the first project's five first agents.
  assert.deepEqual(first.agents.map((a) => a.agent_id),
    [0, 100, 200, 300, 400].map(agent));
  assert.ok(first.agents.every((a) => a.project_id === project(0)));
  assert.equal(first.counts.agents, AGENTS);
  assert.equal(first.counts.online, AGENTS);
  assert.equal(first.counts.stale + first.counts.offline, 0);
  const whole = await (await get('')).json();
  assert.equal(whole.partial, false);
  assert.equal(whole.agents.length, AGENTS);
  assert.deepEqual(whole.agents.slice(0, 5), first.agents);
  const roles = await (await fetch(`${base}/api/roles`, { headers: { Cookie: cookie } })).json();
  assert.equal(first.counts.roles, roles.roles.length);
  for (const bad of ['0', '-1', 'ten', '1001', '']) {
    const r = await get(`?first=${bad}`);
    assert.equal(r.status, 400, `first=${bad}`);
    const body = await r.json();
    assert.equal(body.code, 'INVALID_ARGUMENT');
    assert.equal(body.reason, 'REQUEST_INVALID');
  }
});

test('a fleet of 10,000 agents opens from its first rows, counts every agent, and a search finds one never drawn', async () => {
  const page = await newPage();
  watcher = new Watcher(page);
  const t = Date.now();
  await page.goto(`${base}/`, { waitUntil: 'domcontentloaded' });
  await watcher.shows('the fleet of 10,000 counted, its first rows drawn and the stream live', t, (n) =>
    document.querySelector('#fleet-count').textContent.startsWith(`${n} agents, ${n} online`) &&
    document.querySelectorAll('#fleet tr[data-agent-id]').length > 10 &&
    !!document.querySelector('#live.on'), AGENTS);
  await watcher.shows('the whole fleet loaded', t, (n) =>
    document.querySelector('#fleet-count').textContent === `${n} agents, ${n} online`, AGENTS);
  const shown = await fleetShown(page);
  // Only the rows in view and a margin exist in the DOM, in the table's
  // order: the first project's agents.
  assert.ok(shown.rows.length < 200, `${shown.rows.length} rows in the DOM`);
  assert.equal(shown.rows[0], agent(0));
  assert.equal(shown.rows[1], agent(100));
  // An agent of the 77th project was never drawn; the search finds it.
  const far = agent(9876);
  assert.ok(!shown.rows.includes(far));
  await search(page, far);
  await watcher.shows('the search for an agent never drawn', Date.now(), (id) =>
    document.querySelectorAll('#fleet tr[data-agent-id]').length === 1 &&
    !!document.querySelector(`#fleet tr[data-agent-id="${id}"] td.status-online`) &&
    document.querySelector('#fleet-count').textContent.endsWith(', 1 shown'), far);
  // By project: the 100 agents of one project, of 10,000.
  await search(page, project(42));
  await watcher.shows('the search for one project', Date.now(), (p) =>
    document.querySelector('#fleet-count').textContent.endsWith(', 100 shown') &&
    [...document.querySelectorAll('#fleet tr[data-agent-id]')].every((tr) => tr.dataset.project === p),
  project(42));
  // A status filter over every agent: none is offline yet.
  await search(page, '');
  await page.select('#fleet-status', 'offline');
  await watcher.shows('the offline filter over 10,000 agents', Date.now(), () =>
    document.querySelector('#fleet-count').textContent.endsWith(', 0 shown'));
  await page.select('#fleet-status', '');
  await page.close();
});

test('on an open page of 10,000 agents a registration and a deregistration show live, counts included', async () => {
  const page = await newPage();
  watcher = new Watcher(page);
  await page.goto(`${base}/`, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction((n) =>
    document.querySelector('#fleet-count').textContent === `${n} agents, ${n} online` &&
    !!document.querySelector('#live.on'), { timeout: DEADLINE_MS, polling: 'mutation' }, AGENTS);
  // A new agent sorts among the first rows (the first project, first id).
  let t = Date.now();
  await client.presence.registerAgent({
    agentId: 'fleet-agent-0000a', cli: 'AGENT_CLI_CODEX', projectId: project(0),
    heartbeatTtl: { seconds: 7200 },
  });
  await watcher.shows('a registration on a page of 10,000', t, (n) =>
    !!document.querySelector('#fleet tr[data-agent-id="fleet-agent-0000a"] td.status-online') &&
    document.querySelector('#fleet-count').textContent === `${n + 1} agents, ${n + 1} online`, AGENTS);
  const rows = (await fleetShown(page)).rows;
  assert.deepEqual(rows.slice(0, 2), [agent(0), 'fleet-agent-0000a']);
  // One far down the table, never drawn, goes offline: the count shows it,
  // and the offline filter finds it.
  t = Date.now();
  await client.presence.deregister({ agentId: agent(9999) });
  await watcher.shows('a deregistration far down the table, in the counts', t, (n) =>
    document.querySelector('#fleet-count').textContent === `${n + 1} agents, ${n} online`, AGENTS);
  await page.select('#fleet-status', 'offline');
  await watcher.shows('the offline agent found by the filter', Date.now(), (id) =>
    document.querySelectorAll('#fleet tr[data-agent-id]').length === 1 &&
    !!document.querySelector(`#fleet tr[data-agent-id="${id}"] td.status-offline`), agent(9999));
  await page.close();
});

test('a change the stream brings while the whole fleet is on its way survives the older snapshot', async () => {
  const page = await newPage();
  watcher = new Watcher(page);
  // The whole fleet's snapshot is read before the change and handed to the
  // page only after the page showed the change (from the stream, on one of
  // its first rows): the merge must keep the newer row.
  const cookie = () => page.cookies().then((cs) => cs.map((c) => `${c.name}=${c.value}`).join('; '));
  let release;
  const released = new Promise((r) => { release = r; });
  let read;
  const older = new Promise((r) => { read = r; });
  await page.setRequestInterception(true);
  page.on('request', async (request) => {
    const url = new URL(request.url());
    if (url.pathname !== '/api/fleet' || url.search !== '') return request.continue();
    const response = await fetch(`${base}/api/fleet`, { headers: { Cookie: await cookie() } });
    const body = await response.text();
    read(JSON.parse(body));
    await released;
    return request.respond({ status: 200, contentType: 'application/json; charset=utf-8', body });
  });
  const target = agent(100);  // the second row of the first project
  await page.goto(`${base}/`, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction((id) => !!document.querySelector(`#fleet tr[data-agent-id="${id}"] td.status-online`) &&
    !!document.querySelector('#live.on') &&
    document.querySelector('#fleet-count').textContent.endsWith('(loading)'),
  { timeout: DEADLINE_MS, polling: 'mutation' }, target);
  const snapshot = await older;
  assert.equal(snapshot.agents.find((a) => a.agent_id === target).status, 'online');
  const t = Date.now();
  await client.presence.deregister({ agentId: target });
  await watcher.shows('a drawn row changed while the whole fleet waits', t, (id) =>
    !!document.querySelector(`#fleet tr[data-agent-id="${id}"] td.status-offline`), target);
  release();
  await watcher.shows('the whole fleet merged', Date.now(), (n) =>
    !document.querySelector('#fleet-count').textContent.endsWith('(loading)'), AGENTS);
  const status = await page.$eval(`#fleet tr[data-agent-id="${target}"] td.status`, (td) => td.textContent);
  assert.equal(status, 'offline');
  await page.close();
});
