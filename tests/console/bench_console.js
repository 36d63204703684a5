'use strict';
// The console's cost (docs/BENCHMARKS.md, "The web console"): a real hubd
// with AGENTS agents (unary registrations, 100 projects, 2 h leases: they
// stay online and quiet) and ROLES lead roles with one candidate each, then
//   1. the server's time to build each view's snapshot (GET /api/...),
//   2. the browser's time from navigation to the fleet view drawn (every
//      agent and role counted, the rows in view drawn, the stream live;
//      Debian's chromium via puppeteer-core): COLD_RUNS first loads, each
//      in a fresh browser (a new profile), then three warm loads, each
//      split into where it went,
//   3. hubd's CPU at rest over SECONDS without a page, then with the page
//      open on the fleet view (its event stream attached).
//
//   source tools/env.sh
//   HUBD=bazel-bin/hub/hubd NODE_PATH=$HUB_NODE_MODULES \
//     HUB_CONSOLE_MODULES=$HUB_CONSOLE_MODULES node tests/console/bench_console.js
const fs = require('fs');
const { HubClient } = require('../../clients/node/lib');
const { startHubd, launch } = require('./browser');

const AGENTS = Number(process.env.AGENTS || 10000);
const ROLES = Number(process.env.ROLES || 1000);
const SECONDS = Number(process.env.MEASURE_SECONDS || 30);
const TICKS = 100;  // clock ticks per second (/proc/<pid>/stat utime, stime)

const project = (i) => `prj_CONSOLEBENCH${String(i % 100).padStart(10, '0')}`;
const scope = (i) => `scp_CONSOLEBENCH${String(i).padStart(10, '0')}`;
const agent = (i) => `bench-agent-${String(i).padStart(5, '0')}`;

function cpuTicks(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(fields[11]) + Number(fields[12]);  // utime + stime
}

async function percentOfCore(pid, seconds) {
  const t0 = cpuTicks(pid);
  const w0 = Date.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  return (100 * (cpuTicks(pid) - t0)) / TICKS / ((Date.now() - w0) / 1000);
}

async function inParallel(count, width, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < count) await fn(next++);
  }));
}

async function timed(fn) {
  const t = process.hrtime.bigint();
  const v = await fn();
  return [Number(process.hrtime.bigint() - t) / 1e6, v];
}

(async () => {
  const { hubd, base } = await startHubd('bench-console', []);
  const client = new HubClient(hubd.address, { deadlineMs: 60000 });
  let [ms] = await timed(() => inParallel(AGENTS, 64, (i) => client.presence.registerAgent({
    agentId: agent(i), cli: ['AGENT_CLI_CLAUDE', 'AGENT_CLI_CODEX', 'AGENT_CLI_GEMINI'][i % 3],
    projectId: project(i), heartbeatTtl: { seconds: 7200 },
  })));
  console.log(`registered ${AGENTS} agents in ${ms.toFixed(0)} ms`);
  [ms] = await timed(() => inParallel(ROLES, 32, (i) => client.roles.upsertRoleCandidate({
    roleKey: { projectId: project(i), kind: 'ROLE_KIND_LEAD', scopeId: scope(i) },
    agentId: agent(i),
  })));
  console.log(`created ${ROLES} roles with a candidate each in ${ms.toFixed(0)} ms`);

  // The elections those candidates asked for settle (nobody is a
  // candidate by capability: no_candidate) before anything is measured.
  await new Promise((r) => setTimeout(r, 3000));
  const cookie = (await fetch(`${base}/api/session`)).headers.get('set-cookie').split(';')[0];
  for (const view of ['fleet', 'roles']) {
    const runs = [];
    let bytes = 0;
    for (let i = 0; i < 5; i++) {
      const [t, body] = await timed(async () => (await fetch(`${base}/api/${view}`, { headers: { Cookie: cookie } })).text());
      runs.push(t);
      bytes = body.length;
    }
    runs.sort((a, b) => a - b);
    console.log(`GET /api/${view}: median ${runs[2].toFixed(0)} ms, min ${runs[0].toFixed(0)} ms, ${(bytes / 1e6).toFixed(1)} MB`);
  }

  const idle = await percentOfCore(hubd.proc.pid, SECONDS);
  console.log(`hubd at rest, no console open: ${idle.toFixed(2)} % of a core over ${SECONDS} s`);

  // Every agent counted, the rows in view drawn, every role counted, the
  // stream live: the fleet view as the issue means it.
  const fleetShown = (page) => page.waitForFunction((a, r) =>
    document.querySelector('#fleet-count').textContent.startsWith(`${a} agents`) &&
    document.querySelectorAll('#fleet tr[data-agent-id]').length > 10 &&
    document.querySelector('#roles-count').textContent.startsWith(`${r} roles`) &&
    document.querySelector('#live.on'),
  { timeout: 120000, polling: 'raf' }, AGENTS, ROLES);
  // Where a load went: the navigation, each file and snapshot fetched
  // (start, first byte, end, bytes on the wire), the console's own marks,
  // and the main thread's script / layout / style time (CDP metrics).
  const phases = async (page) => {
    const timeline = await page.evaluate(() => {
      const [nav] = performance.getEntriesByType('navigation');
      const ms = (v) => v.toFixed(0);
      const files = performance.getEntriesByType('resource')
        .filter((e) => /\/(console\.(js|css)|api\/(session|fleet|roles|messages|events|reservations))/.test(e.name))
        .map((e) => `${new URL(e.name).pathname}${new URL(e.name).search} ` +
          `${ms(e.startTime)}/${ms(e.responseStart)}/${ms(e.responseEnd)} ` +
          `${(e.transferSize / 1e3).toFixed(0)} kB`);
      const marks = performance.getEntriesByType('mark').map((m) => `${m.name}@${ms(m.startTime)}`);
      const measures = performance.getEntriesByType('measure')
        .map((m) => `${m.name} ${ms(m.startTime)}+${ms(m.duration)}`);
      return [`document ${ms(nav.responseEnd)}`, `DOMContentLoaded ${ms(nav.domContentLoadedEventEnd)}`,
        ...files, ...marks, ...measures].join('; ');
    });
    const m = await page.metrics();
    return `${timeline}; main thread: script ${(m.ScriptDuration * 1e3).toFixed(0)}, ` +
      `layout ${(m.LayoutDuration * 1e3).toFixed(0)}, style ${(m.RecalcStyleDuration * 1e3).toFixed(0)}, ` +
      `tasks ${(m.TaskDuration * 1e3).toFixed(0)} ms`;
  };
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

  // Cold: a fresh browser (a fresh profile, a new renderer, nothing
  // cached or compiled) for each first load.
  const COLD = Number(process.env.COLD_RUNS || 3);
  const cold = [];
  const whole = [];
  const wholeLoaded = (page) => page.waitForFunction(() =>
    !document.querySelector('#fleet-count').textContent.endsWith('(loading)'),
  { timeout: 120000, polling: 'raf' });
  let browser;
  let page;
  for (let i = 0; i < COLD; i++) {
    if (browser) await browser.close();
    browser = await launch();
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    const [t] = await timed(async () => {
      await page.goto(`${base}/`, { waitUntil: 'domcontentloaded' });
      await fleetShown(page);
    });
    cold.push(t);
    console.log(`  cold load ${i + 1}: ${t.toFixed(0)} ms, load average ${loadavg()} ` +
      `(ms after navigation start: ${await phases(page)})`);
    // The whole fleet and the roles arrive after the stream opened: from
    // then on a search or a filter sees every agent.
    const [w] = await timed(() => wholeLoaded(page));
    whole.push(t + w);
  }
  // Warm: the last browser loads the page again.
  const warm = [];
  for (let i = 0; i < 3; i++) {
    const [t] = await timed(async () => {
      await page.goto(`${base}/?load=${i}`, { waitUntil: 'domcontentloaded' });
      await fleetShown(page);
    });
    warm.push(t);
    console.log(`  warm load ${i + 1}: ${t.toFixed(0)} ms, load average ${loadavg()} ` +
      `(${await phases(page)})`);
  }
  console.log(`page load to the fleet of ${AGENTS} drawn (${ROLES} roles counted), live: ` +
    `cold ${cold.map((t) => t.toFixed(0)).join(', ')} ms (median ${median(cold).toFixed(0)}), ` +
    `warm ${warm.map((t) => t.toFixed(0)).join(', ')} ms (median ${median(warm).toFixed(0)}); ` +
    `cold, to the whole fleet loaded: ${whole.map((t) => t.toFixed(0)).join(', ')} ms`);
  await wholeLoaded(page);
  // A change on the open page of 10,000: a new agent, first in the table.
  let [live] = await timed(async () => {
    await client.presence.registerAgent({
      agentId: 'bench-agent-0000a', cli: 'AGENT_CLI_CODEX', projectId: project(0),
      heartbeatTtl: { seconds: 7200 },
    });
    await page.waitForFunction(() => !!document.querySelector('tr[data-agent-id="bench-agent-0000a"]'),
      { timeout: 10000, polling: 'raf' });
  });
  console.log(`a registration shown on the open page of ${AGENTS} agents ${live.toFixed(0)} ms after the call`);
  // Scrolled to its end, the last agent is drawn; searched, one row is left.
  [live] = await timed(async () => {
    await client.presence.deregister({ agentId: agent(AGENTS - 1) });
    await page.waitForFunction((n) => document.querySelector('#fleet-count').textContent === `${n + 1} agents, ${n} online`,
      { timeout: 10000, polling: 'raf' }, AGENTS);
  });
  console.log(`a deregistration far down the table counted on the open page ${live.toFixed(0)} ms after the call`);
  let [t] = await timed(async () => {
    await page.$eval('#fleet', (box) => { box.scrollTop = box.scrollHeight; });
    await page.waitForFunction((id) => !!document.querySelector(`tr[data-agent-id="${id}"]`),
      { timeout: 10000, polling: 'raf' }, agent(AGENTS - 1));
  });
  console.log(`scrolled to the last of ${AGENTS} agents: drawn in ${t.toFixed(0)} ms`);
  [t] = await timed(async () => {
    await page.$eval('#fleet-filter', (input, q) => {
      input.value = q;
      input.dispatchEvent(new Event('input'));
    }, agent(4242));
    await page.waitForFunction(() => document.querySelectorAll('#fleet tr[data-agent-id]').length === 1,
      { timeout: 10000, polling: 'raf' });
  });
  console.log(`searched ${AGENTS} agents for one: drawn in ${t.toFixed(0)} ms`);
  await page.$eval('#fleet-filter', (input) => {
    input.value = '';
    input.dispatchEvent(new Event('input'));
  });
  [t] = await timed(async () => {
    await page.click('#tabs button[data-view="roles"]');
    await page.waitForFunction((r) => document.querySelectorAll('.role[data-wire]').length === r &&
      document.querySelector('.role[data-wire]').offsetHeight > 0,
    { timeout: 10000, polling: 'raf' }, ROLES);
  });
  console.log(`first switch to the roles view: ${ROLES} cards built and shown in ${t.toFixed(0)} ms`);
  await page.click('#tabs button[data-view="fleet"]');
  const open = await percentOfCore(hubd.proc.pid, SECONDS);
  console.log(`hubd at rest, console open: ${open.toFixed(2)} % of a core over ${SECONDS} s ` +
    `(${(open - idle).toFixed(2)} points more)`);
  await browser.close();
  client.close();
  await hubd.stop();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
