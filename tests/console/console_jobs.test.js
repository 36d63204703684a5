'use strict';
// The console's jobs view in a real browser (Debian's chromium via
// puppeteer-core) against a real hubd: jobs are created, claimed, beaten,
// failed, completed, timed out and cancelled through the Node client's
// JobService calls, and the page shows each change without a reload: the
// queue by project, priority and age, the running jobs with their worker,
// attempt and deadline, the failures with their reasons, and the late
// result of a superseded attempt. It waits for the DOM, never a fixed time.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { HubClient, PresenceSession, toStruct, duration } = require('../../clients/node/lib');
const {
  DEADLINE_MS, startHubd, launch, Watcher, screenshot, cleanUp,
} = require('./browser');

const PROJECT = 'prj_CONSOLEJOBSTESTAAAAAAA';
const WORKER = 'console-job-worker';
const SUPERVISOR = 'console-job-supervisor';
let hubd;
let client;
let browser;
let page;
let base;
let watcher;
const sessions = [];

before(async () => {
  ({ hubd, base } = await startHubd('console-jobs'));
  client = new HubClient(hubd.address);
  browser = await launch();
  page = await browser.newPage();
  watcher = new Watcher(page);
  await page.setViewport({ width: 1400, height: 1000 });
  page.on('pageerror', (e) => console.log(`# page error: ${e.message}`));
});

after(() => cleanUp({ sessions, browser, clients: [client], hubs: [hubd], watcher }));

// The cells of the row of `job` in table `table` (null: no such row).
function cells(table, job) {
  return page.evaluate((t, id) => {
    const tr = document.querySelector(`#${t} tr[data-job-id="${id}"]`);
    return tr && Object.fromEntries([...tr.cells].map((td) => [td.className.split(' ')[0] || '', td.textContent]));
  }, table, job);
}

// Waits until the row of `job` in `table` has every cell of `want`
// (class -> text, or a RegExp source prefixed with "~"); `want` null:
// until there is no such row.
function shows(what, since, table, job, want) {
  return watcher.shows(what, since, ([t, id, w]) => {
    const tr = document.querySelector(`#${t} tr[data-job-id="${id}"]`);
    if (w === null) return !tr;
    if (!tr) return false;
    return Object.entries(w).every(([cls, text]) => {
      const td = tr.querySelector(`td.${cls}`);
      if (!td) return false;
      return text.startsWith('~') ? new RegExp(text.slice(1)).test(td.textContent) : td.textContent === text;
    });
  }, [table, job, want]);
}

function create(task, extra = {}) {
  return client.jobs.createJob({
    projectId: PROJECT, supervisor: { agentId: SUPERVISOR }, worker: { agentId: WORKER },
    task, maxAttempts: 2, retryPolicy: { initialBackoff: duration(0) }, ...extra,
  });
}

test('the jobs view follows the queue, running jobs, failures and a late result live', async () => {
  const worker = new PresenceSession(client, {
    agentId: WORKER, projectId: PROJECT, cli: 'AGENT_CLI_CODEX', heartbeatTtlMs: 30000,
  });
  sessions.push(worker);
  await worker.start();
  await page.goto(base + '/', { waitUntil: 'load' });
  await page.waitForSelector('#live.on', { timeout: DEADLINE_MS });
  await page.evaluate(() => { window.__sameDocument = 'yes'; });
  await page.click('#tabs button[data-view="jobs"]');

  // The queue: by priority (highest first), a child blocked on its parent.
  let t = Date.now();
  const { job: build } = await create('build the release', { priority: 7 });
  const { job: pkg } = await create('package it', { priority: 3, dependsOn: [build.jobId] });
  const { job: lint } = await create('lint', { priority: 9 });
  await shows('a queued job', t, 'jobs-queue', build.jobId,
    { priority: '7', task: 'build the release', state: 'queued', target: WORKER, supervisor: SUPERVISOR });
  await shows('a blocked job', t, 'jobs-queue', pkg.jobId, { state: `blocked on ${build.jobId}` });
  await shows('a third job', t, 'jobs-queue', lint.jobId, { priority: '9' });
  const order = await page.evaluate(() =>
    [...document.querySelectorAll('#jobs-queue tbody tr')].map((tr) => tr.dataset.jobId));
  assert.deepEqual(order, [lint.jobId, build.jobId, pkg.jobId]);
  assert.match((await cells('jobs-queue', build.jobId)).age, /ago|just now/);

  // A claim moves it to the running jobs: worker, attempt, deadline.
  t = Date.now();
  const { job: claimed } = await client.jobs.claimJob({
    agentId: WORKER, jobId: build.jobId, presenceGeneration: worker.presenceGeneration,
  });
  await shows('a claim', t, 'jobs-running', build.jobId, {
    worker: `${WORKER} (generation ${worker.presenceGeneration})`, attempt: '1 of 2', deadline: '~^\\d+m$',
  });
  assert.equal(await cells('jobs-queue', build.jobId), null);
  t = Date.now();
  await client.jobs.heartbeatJob({ attempt: claimed.attempt, progress: toStruct({ step: 'compile' }) });
  await shows('a heartbeat\'s progress', t, 'jobs-running', build.jobId, { progress: '~"step":\\s*"compile"' });

  // A retryable failure queues attempt 2; its claim runs it.
  t = Date.now();
  await client.jobs.failJob({ attempt: claimed.attempt,
    error: { reason: 'flaky', message: 'runner died', retryable: true } });
  await shows('a retry queued', t, 'jobs-queue', build.jobId, { state: '~^queued' });
  await shows('the ended attempt leaving the running jobs', t, 'jobs-running', build.jobId, null);
  const { job: second } = await client.jobs.claimJob({ agentId: WORKER, jobId: build.jobId });
  await shows('the second attempt', t, 'jobs-running', build.jobId, { attempt: '2 of 2' });

  // Attempt 1's completion comes late: refused, kept, shown.
  t = Date.now();
  await assert.rejects(client.jobs.completeJob({ attempt: claimed.attempt, result: toStruct({ from: 'attempt one' }) }),
    (e) => e.reason === 'ASSIGN_ATTEMPT_MISMATCH');
  await watcher.shows('a late result', t, ([id]) => {
    const tr = document.querySelector(`#jobs-late tr[data-job-id="${id}"][data-attempt="1"]`);
    return tr && tr.querySelector('td.agent').textContent === 'console-job-worker' &&
      /attempt one/.test(tr.querySelector('td.late').textContent) &&
      tr.querySelector('td.state').textContent === 'running (attempt 2)';
  }, [build.jobId]);

  // Attempt 2 succeeds: the child is released, the late result's job ends.
  t = Date.now();
  await client.jobs.completeJob({ attempt: second.attempt, result: toStruct({ ok: true }) });
  await shows('the succeeded job leaving the running jobs', t, 'jobs-running', build.jobId, null);
  await shows('the child released', t, 'jobs-queue', pkg.jobId, { state: 'queued' });
  await watcher.shows('the late result\'s job succeeded', t, ([id]) => {
    const tr = document.querySelector(`#jobs-late tr[data-job-id="${id}"]`);
    return tr && tr.querySelector('td.state').textContent === 'succeeded (attempt 2)';
  }, [build.jobId]);

  // Failures: not retryable, timed out by the store's sweep, cancelled.
  const { job: deploy } = await create('deploy', { maxAttempts: 1 });
  const { job: d } = await client.jobs.claimJob({ agentId: WORKER, jobId: deploy.jobId });
  t = Date.now();
  await client.jobs.failJob({ attempt: d.attempt,
    error: { reason: 'compile_error', message: 'main.cc:1: <b>oops</b>', retryable: false } });
  await shows('a failure', t, 'jobs-failed', deploy.jobId,
    { state: 'failed', reason: 'compile_error', 'error-message': 'main.cc:1: <b>oops</b>', attempt: '1 of 1' });
  assert.equal(await page.evaluate(() => document.querySelector('#jobs-failed b')), null);

  const { job: slow } = await create('slow', { maxAttempts: 1, timeout: duration(1000) });
  await client.jobs.claimJob({ agentId: WORKER, jobId: slow.jobId });
  t = Date.now();
  await shows('a timed out job (the deadline sweep)', t, 'jobs-failed', slow.jobId,
    { state: 'timed_out', reason: 'timed_out' });

  t = Date.now();
  await client.jobs.cancelJob({ jobId: lint.jobId, reason: 'not needed' });
  await shows('a cancelled job', t, 'jobs-failed', lint.jobId,
    { state: 'cancelled', reason: 'cancelled', 'error-message': 'not needed' });
  await shows('the cancelled job leaving the queue', t, 'jobs-queue', lint.jobId, null);

  const counts = await page.$eval('#jobs-count', (n) => n.textContent);
  assert.equal(counts, '1 queued, 0 blocked, 0 running, 3 failed, timed out or cancelled, 1 late result(s)');
  assert.equal(await page.evaluate(() => window.__sameDocument), 'yes');

  // A reload draws the same from the snapshot.
  await page.reload({ waitUntil: 'load' });
  await page.waitForSelector('#live.on', { timeout: DEADLINE_MS });
  await page.click('#tabs button[data-view="jobs"]');
  await page.waitForFunction((want) => document.querySelector('#jobs-count').textContent === want,
    { timeout: DEADLINE_MS }, counts);
  assert.equal((await cells('jobs-failed', slow.jobId)).reason, 'timed_out');
  await screenshot(page, 'jobs', 'jobs');
  await worker.stop();
});
